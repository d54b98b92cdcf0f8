"""`data.articles.split_articles`: whole articles to train on, the rest held out."""
import pytest

from d2lbert.data.articles import split_articles

ARTICLES = [' = Kelmora = ', '', ' Kelmora is a city . It lies on the Peel . ', '',
            ' = = History = = ', ' It was rebuilt . ', ' = Peel River = ', '',
            ' The Peel flows north . ', ' = Tovan = ', ' Tovan was an architect . ']


def test_the_first_articles_train_and_the_rest_are_held_out_with_their_sections(tmp_path):
    source = tmp_path / 'wiki.valid.tokens'
    source.write_text('\n'.join(ARTICLES) + '\n')
    folder = split_articles(str(source), str(tmp_path / 'split'), train_articles=2)
    train = (tmp_path / 'split' / 'wiki.train.tokens').read_text().split('\n')[:-1]
    held_out = (tmp_path / 'split' / 'wiki.valid.tokens').read_text().split('\n')[:-1]
    assert folder == str(tmp_path / 'split')
    assert train == ARTICLES[:9]  # Kelmora with its History section, then Peel River
    assert held_out == ARTICLES[9:] + ['']  # Tovan (the file's last newline kept)


def test_too_few_articles_is_a_value_error_naming_the_file(tmp_path):
    source = tmp_path / 'wiki.valid.tokens'
    source.write_text('\n'.join(ARTICLES) + '\n')
    with pytest.raises(ValueError, match='wiki.valid.tokens: 3 articles, need more than 3'):
        split_articles(str(source), str(tmp_path / 'split'), train_articles=3)
