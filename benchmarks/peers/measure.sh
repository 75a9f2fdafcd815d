#!/bin/bash
# Training speed of fairseq, OpenNMT-py and ours side by side, on the same machine, model and
# data (results/bench/peers-*.json). Run from the repository root, on an idle machine, after
# `make data`:
#
#     bash benchmarks/peers/measure.sh [WORK_DIR]      # default ../peers, outside the repository
#
# Model: Transformer 3+3 layers, d_model 256, FFN 1024, 4 heads, pre-norm, shared embeddings,
# dropout 0.3 / 0.1, label smoothing 0.1, 2 threads. Precision: the peers in fp32, their only
# one on a CPU; ours in fp32 and in its default (`auto`: bf16 autocast where the CPU has
# AVX512_BF16 or AMX). Data: Multi30k en-de as prepared for us, written as our joint 8k
# sentencepiece pieces. Batches: about 2,500 target tokens (ours and fairseq: 2,800 padded
# tokens, counted as batch size x longest side; OpenNMT-py: batch_size 3000 of its own token
# count, tuned to the same real target tokens per step).
# Each run is 40 updates; the figures cover updates 11-40, from each peer's own interval log,
# and measure_report.py writes them to results/bench/peers-<device>-<time>.json.
source benchmarks/peers/setup.sh "$@"
export OMP_NUM_THREADS=2 MKL_NUM_THREADS=2

for run in 1 2; do
    /usr/bin/time -v -o onmt/time$run.log venv/bin/onmt_train -config onmt.yaml \
        > onmt/run$run.log 2>&1
    /usr/bin/time -v -o fairseq/time$run.log "${FAIRSEQ_TRAIN[@]}" --lr 5e-4 \
        --warmup-updates 4000 --no-save --log-interval 10 --max-update 40 \
        > fairseq/run$run.log 2>&1
    for precision in fp32 auto; do
        (cd "$REPO" && .venv/bin/python benchmarks/bench.py --models transformer-small \
            --precision $precision --max-tokens 2800 --warmup-steps 10 --steps 30 \
            --decode-sentences 1 --beams 1 --out "$WORK/ours-$precision$run.json")
    done
done
cd "$REPO" && .venv/bin/python benchmarks/peers/measure_report.py "$WORK"
