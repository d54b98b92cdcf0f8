"""Measuring implementations in interleaved rounds.

A shared machine's speed drifts by several percent over minutes. Measured one after
the other, the implementation that happens to run in a slow minute looks slower than
it is, and a ratio between two of them moves with the drift. So the training steps
are timed in rounds: each implementation runs part of the steps in every round, in
the given order in odd rounds and the reverse order in even ones (A B C, C B A, ...).
A drift that is steady over the run then weighs on every implementation alike, and
each one's result is the total of its rounds.
"""
import math


def round_orders(implementations, rounds):
    """The order of `implementations` in each of `rounds` rounds, reversed every
    second round: ('a', 'b', 'c'), 2 -> [['a', 'b', 'c'], ['c', 'b', 'a']]."""
    forward = list(implementations)
    return [forward if r % 2 == 0 else forward[::-1] for r in range(rounds)]


def steps_per_round(steps, rounds):
    """Timed steps of each round, so that the rounds together time at least `steps`."""
    return math.ceil(steps / rounds)


def merge_rounds(runs):
    """One implementation's step measurements (worker results) of all rounds as one:
    the steps and seconds added, the rates over the total time, the highest peak
    memory; the rounds themselves under 'rounds'. A failed round fails the whole."""
    failed = [run for run in runs if 'error' in run]
    if failed:
        return failed[0]
    seconds = sum(run['seconds'] for run in runs)
    steps = sum(run['steps'] for run in runs)
    return dict(runs[0], steps=steps, seconds=seconds, step_seconds=seconds / steps,
                pairs_per_s=sum(run['pairs_per_s'] * run['seconds'] for run in runs) / seconds,
                real_tokens_per_s=sum(run['real_tokens_per_s'] * run['seconds']
                                      for run in runs) / seconds,
                peak_rss_mb=max(run['peak_rss_mb'] for run in runs), rounds=list(runs))
