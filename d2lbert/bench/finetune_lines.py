"""The benchmark's fine-tuning lines, each an entry of `d2lbert bench --configs`: the
examples every implementation trains on and the module of each implementation (its
`host_batches` and `build_step`).

* 'finetune': sentence-pair classification on SNLI-like pairs (`finetune_pairs`),
  d2lbert, the book's NLI chapter and transformers;
* 'squad': question answering on full 384-token SQuAD windows (`squad_windows`),
  d2lbert and transformers (the book has no SQuAD chapter).
"""
FINETUNE, SQUAD = 'finetune', 'squad'

FINETUNE_MODULES = {
    FINETUNE: {'d2lbert': 'finetune_d2lbert', 'd2l': 'finetune_book',
               'transformers': 'finetune_transformers'},
    SQUAD: {'d2lbert': 'squad_d2lbert', 'transformers': 'squad_transformers'}}


def finetune_examples(line, config_name, steps, warmup, seed=0):
    """(config, warmup examples, timed examples) of fine-tuning line `line`: `warmup`
    and `steps` batches' worth, identical in every process."""
    if line == SQUAD:
        from .squad_windows import benchmark_windows, get_squad_config
        config = get_squad_config(config_name)
        return (config, *benchmark_windows(config, steps, warmup, seed))
    from .finetune_pairs import benchmark_pairs, get_finetune_config
    config = get_finetune_config(config_name)
    return (config, *benchmark_pairs(config, steps, warmup, seed))
