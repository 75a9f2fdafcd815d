#!/bin/bash
# Sourced by measure.sh and decode.sh, from the repository root, after `make data`: sets REPO
# and WORK (the first argument, default ../peers, outside the repository), installs fairseq
# and OpenNMT-py in WORK/venv with the same torch as ours and no other (both pin older
# torches), and CTranslate2 beside them (it needs no torch; it converts fairseq's checkpoint
# with fairseq itself), and writes Multi30k en-de as prepared for us, in our joint 8k
# sentencepiece pieces, for the peers: WORK/data (text), WORK/onmt/vocab.shared and
# WORK/fairseq/bin (binarized); WORK/data/first.* and WORK/fairseq/first are the first
# FIRST_SENTENCES test sentences, for decoding one sentence at a time.
set -euo pipefail
REPO=$(pwd)
WORK=$(realpath -m "${1:-../peers}")
mkdir -p "$WORK/fairseq" "$WORK/onmt"
cp benchmarks/peers/onmt.yaml "$WORK/onmt.yaml"
cd "$WORK"

if [ ! -x venv/bin/fairseq-train ]; then
    python3 -m venv venv
    venv/bin/pip install -q --upgrade pip setuptools wheel
    venv/bin/pip install -q torch==2.13.0
    venv/bin/pip install -q --no-deps OpenNMT-py==3.5.1
    venv/bin/pip install -q configargparse pyyaml numpy cython sentencepiece sacrebleu \
        tensorboard "hydra-core<1.4" "omegaconf<2.4" regex tqdm bitarray cffi spacy scikit-learn
    venv/bin/pip install -q --no-deps "pyonmttok>=1.37,<2" rapidfuzz pyahocorasick \
        fasttext-wheel six
    venv/bin/pip install -q --no-deps --no-build-isolation fairseq-fixed==0.12.3.1
fi
if [ ! -x venv/bin/ct2-fairseq-converter ]; then
    venv/bin/pip install -q ctranslate2==4.8.5
fi

if [ ! -f fairseq/bin/test.en-de.de.bin ]; then
    venv/bin/python "$REPO/benchmarks/peers/pieces.py" "$REPO/data/multi30k.en-de" data
    venv/bin/onmt_build_vocab -config onmt.yaml -n_sample -1 -num_threads 1
    venv/bin/fairseq-preprocess --source-lang en --target-lang de --trainpref data/train \
        --validpref data/valid --testpref data/test --destdir fairseq/bin --joined-dictionary \
        --workers 1
fi
FIRST_SENTENCES=200
if [ ! -f fairseq/first/test.en-de.de.bin ]; then
    for lang in en de; do head -n "$FIRST_SENTENCES" "data/test.$lang" > "data/first.$lang"; done
    venv/bin/fairseq-preprocess --source-lang en --target-lang de --testpref data/first \
        --destdir fairseq/first --srcdict fairseq/bin/dict.en.txt \
        --tgtdict fairseq/bin/dict.de.txt --workers 1
fi

# fairseq's training arguments for the model, loss, optimiser and batches of onmt.yaml and of
# our transformer-small preset; each script adds the learning rate and the run length.
FAIRSEQ_TRAIN=(
    venv/bin/fairseq-train fairseq/bin --source-lang en --target-lang de --task translation
    --arch transformer --encoder-layers 3 --decoder-layers 3
    --encoder-embed-dim 256 --decoder-embed-dim 256
    --encoder-ffn-embed-dim 1024 --decoder-ffn-embed-dim 1024
    --encoder-attention-heads 4 --decoder-attention-heads 4
    --encoder-normalize-before --decoder-normalize-before --share-all-embeddings
    --dropout 0.3 --attention-dropout 0.1 --activation-dropout 0.3
    --criterion label_smoothed_cross_entropy --label-smoothing 0.1
    --optimizer adam --adam-betas "(0.9, 0.98)" --weight-decay 0.0001 --clip-norm 1.0
    --lr-scheduler inverse_sqrt --max-tokens 2800 --required-batch-size-multiple 1
    --update-freq 1 --cpu --num-workers 0 --seed 1 --disable-validation --log-format json
)
