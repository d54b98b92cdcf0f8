"""The transfer study's fixed choices (`transfer_study.py`): the fine-tuning seeds, the
SST-2 subset, and the tiny settings of --quick."""

SEEDS = (0, 1, 2)
SUBSET = 1000  # sentences of the small SST-2 training set
SUBSET_SEED = 0
QUICK = {'steps': 20, 'book_seconds': 5, 'book_batch_size': 64, 'evaluations': 2,
         'sst2_sentences': 200, 'finetune_flags': ['--epochs', '1', '--max-len', '64'],
         'seeds': (0,)}
