"""`d2lbert fill-mask`: the masked LM's predictions for each [MASK] of a line, the same
as transformers' `BertForMaskedLM` computes (on a tiny random model, and on MiniLM
continued a few steps and converted), written safely, bad input named in one line."""
import json
import os
import random

import numpy as onp
import pytest

transformers = pytest.importorskip('transformers')
torch = pytest.importorskip('torch')

from test_cli_flags import run_main  # noqa: E402
from test_continue import TOKENS, WORDS, save_hf  # noqa: E402
from test_inputs import minilm_folder  # noqa: E402

LINES = ['word1 word2 [MASK] word3 .', '[MASK] word7 . word9 [MASK] word11 [MASK]',
         'Word5 [MASK].']
SST2_DEV = '/work/shared/data/sst-2/dev.tsv'


@pytest.fixture(autouse=True)
def d2lbert_home(tmp_path, monkeypatch):
    monkeypatch.setenv('D2LBERT_HOME', str(tmp_path / 'home'))


def write_lines(path, lines):
    with open(path, 'w', encoding='utf-8') as f:
        f.writelines(line + '\n' for line in lines)
    return str(path)


def transformers_predictions(model_dir, lines):
    """For each line, for each [MASK]: (top-1 token, its probability) of transformers'
    BertForMaskedLM and BertTokenizer."""
    model = transformers.BertForMaskedLM.from_pretrained(model_dir).eval()
    tokenizer = transformers.BertTokenizer.from_pretrained(model_dir)
    results = []
    for line in lines:
        inputs = tokenizer(line, return_tensors='pt')
        with torch.no_grad():
            logits = model(**inputs).logits[0]
        masks = (inputs['input_ids'][0] == tokenizer.mask_token_id).nonzero()[:, 0]
        best = logits[masks].softmax(-1).max(-1)
        results.append([(tokenizer.convert_ids_to_tokens(int(i)), float(p))
                        for p, i in zip(best.values, best.indices)])
    return results


def fill(model, data, out, capsys, *more):
    code, err = run_main(['fill-mask', '--model', model, '--data', data, '--out', out, *more],
                         capsys)
    assert code == 0, err
    with open(out, encoding='utf-8') as f:
        return [json.loads(line) for line in f]


def test_predictions_are_those_of_transformers(tmp_path, capsys):
    """A Hugging Face BertForMaskedLM read directly: per line, one list of --top-k per
    [MASK] in order, most probable first; the best token and its probability are
    transformers'."""
    model = save_hf(transformers.BertForMaskedLM, tmp_path / 'mlm')
    data = write_lines(tmp_path / 'masks.txt', LINES[:2] + [''] + LINES[2:])
    records = fill(model, data, str(tmp_path / 'out.jsonl'), capsys, '--top-k', '3')
    assert [r['text'] for r in records] == LINES
    assert [len(r['predictions']) for r in records] == [1, 3, 1]
    for record, expected in zip(records, transformers_predictions(model, LINES)):
        for slot, (token, probability) in zip(record['predictions'], expected):
            assert len(slot) == 3
            scores = [p['score'] for p in slot]
            assert scores == sorted(scores, reverse=True)
            assert (slot[0]['token'], slot[0]['score']) == (token, pytest.approx(
                probability, abs=1e-5))


def test_a_model_without_masked_lm_head_or_bad_lines_are_refused(tmp_path, capsys):
    """One line naming the flag (and the line), exit 2, no --out written."""
    bare = save_hf(transformers.BertModel, tmp_path / 'bare')
    model = save_hf(transformers.BertForMaskedLM, tmp_path / 'mlm')
    good = write_lines(tmp_path / 'good.txt', LINES)
    no_mask = write_lines(tmp_path / 'no_mask.txt', [LINES[0], 'word1 word2'])
    too_long = write_lines(tmp_path / 'long.txt', ['[MASK] ' + 'word1 ' * 60])
    latin1 = tmp_path / 'latin1.txt'
    latin1.write_bytes('caf\xe9 [MASK]\n'.encode('latin-1'))
    out = str(tmp_path / 'out.jsonl')
    capsys.readouterr()  # transformers' saving progress
    for args, expected in [(['--model', bare, '--data', good], '--model'),
                           (['--model', model, '--data', no_mask], 'line 2 holds no [MASK]'),
                           (['--model', model, '--data', too_long], 'line 1 is'),
                           (['--model', model, '--data', str(latin1)], 'not UTF-8'),
                           (['--model', model, '--data', good, '--top-k', '0'], '--top-k')]:
        code, err = run_main(['fill-mask', *args, '--out', out], capsys)
        assert code == 2 and len(err.strip().splitlines()) == 1, err
        assert expected in err
        assert not os.path.lexists(out)


def test_output_is_never_written_over_a_file_or_through_a_link(tmp_path, capsys):
    model = save_hf(transformers.BertForMaskedLM, tmp_path / 'mlm')
    data = write_lines(tmp_path / 'masks.txt', LINES)
    existing = tmp_path / 'existing.jsonl'
    existing.write_text('keep me\n')
    target = tmp_path / 'target.jsonl'
    target.write_text('keep me too\n')
    link = tmp_path / 'link.jsonl'
    link.symlink_to(target)
    capsys.readouterr()  # transformers' saving progress
    for out, flags in [(existing, []), (link, ['--overwrite']), (data, ['--overwrite'])]:
        code, err = run_main(['fill-mask', '--model', model, '--data', data, '--out',
                              str(out), *flags], capsys)
        assert code == 2 and '--out' in err, err
    assert existing.read_text() == 'keep me\n' and target.read_text() == 'keep me too\n'
    assert fill(model, data, str(existing), capsys, '--overwrite')[0]['text'] == LINES[0]


def sst2_masked_lines(count, seed=0):
    """SST-2 dev sentences, one word of each replaced by [MASK]."""
    if not os.path.isfile(SST2_DEV):
        pytest.skip(f'{SST2_DEV} is absent')
    with open(SST2_DEV, encoding='utf-8') as f:
        sentences = [line.split('\t')[0].strip() for line in list(f)[1:]]
    rng = random.Random(seed)
    lines = []
    for sentence in rng.sample(sentences, count):
        words = sentence.split()
        words[rng.randrange(len(words))] = '[MASK]'
        lines.append(' '.join(words))
    return sentences, lines


def test_minilm_continued_and_converted_predicts_as_transformers(tmp_path, capsys):
    """MiniLM (a bare BertModel) continued 3 steps on SST-2 text, converted to Hugging
    Face: fill-mask's top-1 is transformers' BertForMaskedLM's on >= 99% of masks."""
    sentences, lines = sst2_masked_lines(100)
    text = write_lines(tmp_path / 'text.txt', [' '.join(sentences[i:i + 3])
                                               for i in range(0, 300, 3)])
    run = str(tmp_path / 'run')
    code, err = run_main(['pretrain', '--model', minilm_folder(), '--data', text, '--out',
                          run, '--objective', 'mlm', '--steps', '3', '--batch-size', '8',
                          '--eval-every', '0', '--no-progress'], capsys)
    assert code == 0, err
    code, err = run_main(['convert', '--to-hf', run, '--out', str(tmp_path / 'hf')], capsys)
    assert code == 0, err
    data = write_lines(tmp_path / 'masks.txt', lines)
    records = fill(run, data, str(tmp_path / 'out.jsonl'), capsys, '--top-k', '1')
    expected = transformers_predictions(str(tmp_path / 'hf'), lines)
    ours = [slot[0]['token'] for record in records for slot in record['predictions']]
    theirs = [token for slots in expected for token, _ in slots]
    assert len(ours) == len(theirs) == 100
    assert onp.mean([a == b for a, b in zip(ours, theirs)]) >= 0.99
