"""The transfer study's probe part: does the pretrained encoder hold what SST-2 needs
before any fine-tuning? Linear probes on frozen encodings; see transfer_study.py."""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from runner import log  # noqa: E402
from transfer_settings import QUICK, SEEDS, SUBSET, SUBSET_SEED  # noqa: E402


def read_sst2(path):
    """(sentences, labels) of an SST-2 file (`d2lbert.data.tasks.read_glue`)."""
    from d2lbert.data.tasks import read_glue
    examples = read_glue('sst2', path).examples
    return [example.text for example in examples], [example.label for example in examples]


def mean_encodings(net, vocab, sentences):
    """(sentences, hidden): the mean of each sentence's encodings by `net`, over all
    of `<cls> sentence <sep>`, as `finetune --pooling mean` reads them
    (`model.classifier.mean_of_valid`) before its pooler."""
    from d2lbert.data.tasks.encoding import tokenizer_for
    from d2lbert.interop import get_bert_encoding
    import numpy as np
    tokenize = tokenizer_for(vocab)
    return np.stack([get_bert_encoding(net, vocab, tokenize(s))[0].mean(axis=0)
                     .asnumpy() for s in sentences])


def probe_accuracy(train_features, train_labels, dev_features, dev_labels):
    """Dev accuracy of a logistic regression on frozen features (standardized; its
    regularization chosen by 5-fold cross-validation on the training set)."""
    from sklearn.linear_model import LogisticRegressionCV
    from sklearn.pipeline import make_pipeline
    from sklearn.preprocessing import StandardScaler
    probe = make_pipeline(StandardScaler(with_mean=not hasattr(train_features, 'tocsr')),
                          LogisticRegressionCV(Cs=10, max_iter=5000))
    return float(probe.fit(train_features, train_labels).score(dev_features, dev_labels))


def probe_part(model, sst2, scratch, quick):
    """Linear probes on the 1,000-sentence subset: does the pretrained encoder hold
    what the task needs before any fine-tuning? A logistic regression on the frozen mean
    encodings of the pretrained model, of the same architecture and vocabulary with
    random parameters (`run.models.random_model_like`, the seeds), and on a bag of words
    (which words a sentence has), each scored on SST-2 dev."""
    import numpy as np
    from sklearn.feature_extraction.text import CountVectorizer
    from d2lbert.data.tasks import write_sample
    from d2lbert.interop import load_pretrained
    from d2lbert.run.models import random_model_like
    try:
        bert, vocab = load_pretrained(model)
    except (FileNotFoundError, ValueError) as error:
        raise SystemExit(f'--model {model}: {error}') from None
    size = QUICK['sst2_sentences'] if quick else SUBSET
    seeds = QUICK['seeds'] if quick else SEEDS
    train, train_labels = read_sst2(write_sample(
        os.path.join(sst2, 'train.tsv'), os.path.join(scratch, 'probe-subset.tsv'), size,
        SUBSET_SEED))
    dev, dev_labels = read_sst2(os.path.join(sst2, 'dev.tsv'))
    if quick:
        dev, dev_labels = dev[:size], dev_labels[:size]
    words = CountVectorizer(binary=True).fit(train)
    results = {'bag_of_words': probe_accuracy(words.transform(train), train_labels,
                                              words.transform(dev), dev_labels)}
    starts = [('pretrained', bert)] + [(f'random_{seed}', random_model_like(bert, seed))
                                       for seed in seeds]
    for name, net in starts:
        results[name] = probe_accuracy(mean_encodings(net, vocab, train), train_labels,
                                       mean_encodings(net, vocab, dev), dev_labels)
        log(f'  probe {name}: dev accuracy {results[name]:.3f}')
    results['random'] = float(np.mean([results[f'random_{seed}'] for seed in seeds]))
    return {'sentences': size, 'seeds': list(seeds), 'accuracy': results}
