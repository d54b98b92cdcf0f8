"""Fine-tuning (`d2lbert finetune`, `d2lbert predict`): a pretrained BERT with a task head.

:mod:`.finetune` (the options and the loop), :mod:`.tasks` (every task: its files, head,
metrics, options), :mod:`.task_readers`, :mod:`.labelled_task` (classification, pairs, tagging), :mod:`.task_model` (the
saved task model), :mod:`.task_step`, :mod:`.task_predictions`, :mod:`.task_metrics`,
:mod:`.predict`; question answering beside them: :mod:`.qa_task`, :mod:`.qa_predict`,
:mod:`.qa_predictions`, :mod:`.squad_metric`. Nothing here imports `d2lbert.pretraining`.
"""
