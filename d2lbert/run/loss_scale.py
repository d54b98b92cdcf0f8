"""Dynamic loss scaling for float16 mixed precision."""
import numpy as onp


class DynamicLossScale:
    """Dynamic loss scaling, for float16 mixed precision (`--precision fp16`);
    the training loop (`loop.py`) applies it.

    Small float16 gradients underflow to 0, so the loss is multiplied by `scale`
    before the backward pass and the update divides the gradients by it. After a
    step whose gradients overflowed (inf or NaN), the update is skipped and the
    scale halved; after `window` good steps in a row it doubles. (MXNet's own
    `amp` LossScaler checks the gradients with a legacy operator that fails on the
    NumPy-interface arrays d2lbert uses.)
    """
    def __init__(self, scale=2.0 ** 16, window=2000, max_scale=2.0 ** 24):
        self.scale, self.window, self.max_scale = scale, window, max_scale
        self._good_steps = 0

    def overflowed(self, grads):
        """Did any of these gradients overflow? Adjusts the scale (one host sync)."""
        total = sum(g.astype('float32').sum() for g in grads)
        if not onp.isfinite(float(total)):
            self.scale, self._good_steps = max(self.scale / 2, 1.0), 0
            return True
        self._good_steps += 1
        if self._good_steps == self.window:
            self.scale, self._good_steps = min(self.scale * 2, self.max_scale), 0
        return False
