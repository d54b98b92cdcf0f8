"""The classifier `d2lbert finetune` makes with its defaults goes to Hugging Face (issue
42 item 4): a real checkpoint (all-MiniLM-L6-v2) fine-tuned on single sentences,
`convert --to-hf`, then transformers' AutoModelForSequenceClassification fed by
the converted folder's own AutoTokenizer gives the probabilities `d2lbert predict`
writes. (Its default once read the mean of the tokens, which no Hugging Face
classifier computes, and convert refused it.)"""
import json

import numpy as onp
import pytest

from conftest import run_main
from test_inputs import minilm_folder

transformers = pytest.importorskip('transformers')
torch = pytest.importorskip('torch')

TOLERANCE = 1e-3  # probabilities: float32 in two frameworks
POSITIVE = ['a gorgeous , witty , seductive movie .', 'the acting is superb',
            'an utterly charming and hilarious film', 'one of the best films of the year',
            'a moving and beautifully made story', 'funny , smart and touching']
NEGATIVE = ['a dull , lifeless mess', 'the plot is a hopeless tangle',
            'nothing here is worth the ticket', 'a tedious , overlong bore',
            'the jokes fall painfully flat', 'an ugly , pointless exercise']
DEV = ['a witty and gorgeous story', 'hyperparameterization of a tedious mess !',
       "it's not the worst film , but close", 'superb']


def write_tsv(path, sentences, labels):
    """GLUE SST-2's layout: a header, then sentence<TAB>label."""
    with open(path, 'w', encoding='utf-8') as f:
        f.write('sentence\tlabel\n')
        f.writelines(f'{text}\t{label}\n' for text, label in zip(sentences, labels))
    return str(path)


def hf_probabilities(folder, sentences):
    """{label: probability} per sentence, by transformers from the converted folder
    alone: its tokenizer, its model, one padded batch."""
    tokenizer = transformers.AutoTokenizer.from_pretrained(folder)
    model = transformers.AutoModelForSequenceClassification.from_pretrained(folder).eval()
    with torch.no_grad():
        logits = model(**tokenizer(sentences, padding=True, return_tensors='pt')).logits
    rows = torch.softmax(logits, dim=-1).numpy()
    return [{model.config.id2label[i]: float(p) for i, p in enumerate(row)} for row in rows]


def test_the_default_sst2_classifier_predicts_the_same_in_transformers(tmp_path, capsys):
    model = minilm_folder()
    train = write_tsv(tmp_path / 'train.tsv', POSITIVE + NEGATIVE,
                      [1] * len(POSITIVE) + [0] * len(NEGATIVE))
    dev = write_tsv(tmp_path / 'dev.tsv', DEV, [1, 0, 0, 1])
    run, hf = tmp_path / 'run', tmp_path / 'hf'
    code, _, err = run_main(['finetune', '--task', 'glue/sst2', '--model', model, '--data',
                             train, '--dev', dev, '--out', run, '--epochs', '1',
                             '--batch-size', '4', '--max-len', '32', '--no-progress'], capsys)
    assert code == 0, err
    code, _, err = run_main(['convert', '--to-hf', run, '--out', hf], capsys)
    assert code == 0, err
    code, _, err = run_main(['predict', '--model', run, '--data', dev, '--out',
                             tmp_path / 'predictions.jsonl'], capsys)
    assert code == 0, err
    with open(tmp_path / 'predictions.jsonl', encoding='utf-8') as f:
        ours = [json.loads(line)['probabilities'] for line in f]
    theirs = hf_probabilities(str(hf), DEV)
    assert [sorted(row) for row in ours] == [sorted(row) for row in theirs]
    difference = max(abs(row[label] - their_row[label])
                     for row, their_row in zip(ours, theirs) for label in row)
    print(f'max |d2lbert predict - transformers| = {difference:.1e}')
    assert difference < TOLERANCE
    assert onp.ptp([row['1'] for row in ours]) > 1e-4  # the sentences get different answers
