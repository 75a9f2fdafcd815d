#!/bin/bash
# Training speed of fairseq, OpenNMT-py and ours side by side, on the same machine, model and
# data (results/bench/peers-*.json). Run from the repository root, on an idle machine, after
# `make data`:
#
#     bash scripts/peers/measure.sh [WORK_DIR]      # default ../peers, outside the repository
#
# Model: Transformer 3+3 layers, d_model 256, FFN 1024, 4 heads, pre-norm, shared embeddings,
# dropout 0.3 / 0.1, label smoothing 0.1, 2 threads. Precision: the peers in fp32, their only
# one on a CPU; ours in fp32 and in its default (`auto`: bf16 autocast where the CPU has
# AVX512_BF16 or AMX). Data: Multi30k en-de as prepared for us, written as our joint 8k
# sentencepiece pieces. Batches: about 2,500 target tokens (ours and fairseq: 2,800 padded
# tokens, counted as batch size x longest side; OpenNMT-py: batch_size 3000 of its own token
# count, tuned to the same real target tokens per step).
# Each run is 40 updates; the figures cover updates 11-40, from each peer's own interval log.
set -euo pipefail
REPO=$(pwd)
WORK=$(realpath -m "${1:-../peers}")
export OMP_NUM_THREADS=2 MKL_NUM_THREADS=2
mkdir -p "$WORK/fairseq" "$WORK/onmt"
cp scripts/peers/onmt.yaml "$WORK/onmt.yaml"
cd "$WORK"

# The peers' own environment, with the same torch and no other (both pin older torches).
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

venv/bin/python "$REPO/scripts/peers/pieces.py" "$REPO/data/multi30k.en-de" data
venv/bin/onmt_build_vocab -config onmt.yaml -n_sample -1 -num_threads 1
venv/bin/fairseq-preprocess --source-lang en --target-lang de --trainpref data/train \
    --validpref data/valid --testpref data/test --destdir fairseq/bin --joined-dictionary \
    --workers 1

fairseq_train() {
    venv/bin/fairseq-train fairseq/bin --source-lang en --target-lang de --task translation \
        --arch transformer --encoder-layers 3 --decoder-layers 3 \
        --encoder-embed-dim 256 --decoder-embed-dim 256 \
        --encoder-ffn-embed-dim 1024 --decoder-ffn-embed-dim 1024 \
        --encoder-attention-heads 4 --decoder-attention-heads 4 \
        --encoder-normalize-before --decoder-normalize-before --share-all-embeddings \
        --dropout 0.3 --attention-dropout 0.1 --activation-dropout 0.3 \
        --criterion label_smoothed_cross_entropy --label-smoothing 0.1 \
        --optimizer adam --adam-betas '(0.9, 0.98)' --weight-decay 0.0001 --clip-norm 1.0 \
        --lr 5e-4 --lr-scheduler inverse_sqrt --warmup-updates 4000 \
        --max-tokens 2800 --required-batch-size-multiple 1 --update-freq 1 \
        --cpu --num-workers 0 --seed 1 --disable-validation --no-save \
        --log-format json --log-interval 10 --max-update 40
}

for run in 1 2; do
    /usr/bin/time -v -o onmt/time$run.log venv/bin/onmt_train -config onmt.yaml \
        > onmt/run$run.log 2>&1
    venv/bin/python "$REPO/scripts/peers/interval_speed.py" onmt onmt/run$run.log \
        onmt/time$run.log
    /usr/bin/time -v -o fairseq/time$run.log bash -c "$(declare -f fairseq_train); fairseq_train" \
        > fairseq/run$run.log 2>&1
    venv/bin/python "$REPO/scripts/peers/interval_speed.py" fairseq fairseq/run$run.log \
        fairseq/time$run.log
    for precision in fp32 auto; do
        (cd "$REPO" && .venv/bin/python scripts/benchmark.py --models transformer-small \
            --precision $precision --max-tokens 2800 --warmup-steps 10 --steps 30 \
            --decode-sentences 1 --beams 1 --out "$WORK/ours-$precision$run.json")
    done
done
