#!/bin/bash
# Beam-5 decoding speed of fairseq, OpenNMT-py and ours side by side, at about equal BLEU
# (results/bench/peers-decode-*.json). Run from the repository root after `make data`:
#
#     bash benchmarks/peers/decode.sh [WORK_DIR [STEPS]]   # defaults ../peers and 1000 updates
#
# 1. Trains the model of measure.sh (Transformer 3+3, d_model 256, FFN 1024, 4 heads, pre-norm,
#    shared embeddings, dropout 0.3 / 0.1, label smoothing 0.1, Adam (0.9, 0.98), clip 1.0,
#    batches of about 2,500 target tokens) in each toolkit for STEPS updates with the same
#    schedule: linear warmup to 1e-3 over 400 updates, then inverse square root. Each toolkit
#    trains in its default precision on this CPU (ours: bf16 autocast where the CPU has
#    AVX512_BF16; the peers: fp32). A model already trained in WORK_DIR is kept.
# 2. Decodes the 1000 test sentences twice with each model: beam 5, batches of 128 sentences,
#    at most 1.5 x source length + 10 tokens (OpenNMT-py: + 5), 2 threads, each in its default
#    precision (the peers: fp32; ours: decode.precision auto, bf16 autocast where the CPU has
#    AVX512_BF16 or AMX), and ours also in int8 (decode.precision int8); ours and OpenNMT-py
#    rank finished hypotheses with the GNMT length penalty (alpha 1), fairseq by the mean
#    log-probability per token (its only length normalisation). The time is each toolkit's
#    own clock around its decoding loop (model loading excluded): fairseq-generate's
#    "Translated ... in Xs", onmt_translate -report_time's "Total translation time", and ours
#    benchmarks/bench.py's decoding time.
#    Peak memory: the maximum resident set size of each decoding process (the peers': from
#    /usr/bin/time -v; ours: benchmarks/bench.py's, whose decoding runs in a process of its own).
# 3. Scores all outputs the same way (our sentencepiece model detokenizes the pieces, sacreBLEU
#    scores them against the test references) and writes the JSON (decode_report.py).
#
# TRAIN_THREADS (default 2) sets the threads for training; PAUSE_PID, when set, is a process
# (another training run, say) that is stopped while the decoders are timed and resumed after.
source benchmarks/peers/setup.sh "${1:-../peers}"
STEPS=${2:-1000}
export OMP_NUM_THREADS=${TRAIN_THREADS:-2} MKL_NUM_THREADS=${TRAIN_THREADS:-2}

if [ ! -f fairseq/ckpt/checkpoint_last.pt ]; then
    "${FAIRSEQ_TRAIN[@]}" --lr 1e-3 --warmup-updates 400 --warmup-init-lr 0 \
        --max-update "$STEPS" --save-dir fairseq/ckpt --no-epoch-checkpoints \
        --save-interval-updates "$STEPS" --log-interval 100 > fairseq/train.log 2>&1
fi
if [ ! -f "onmt/model_step_$STEPS.pt" ]; then
    # noam: lr = learning_rate * 256^-0.5 * min(step^-0.5, step * 400^-1.5), 1e-3 at step 400
    venv/bin/onmt_train -config onmt.yaml -train_steps "$STEPS" -warmup_steps 400 \
        -learning_rate 0.32 -save_checkpoint_steps "$STEPS" -report_every 100 \
        > onmt/train.log 2>&1
fi
if [ ! -f ours/last.pt ]; then
    (cd "$REPO" && .venv/bin/seq2seq train \
        --config configs/transformer.multi30k.en-de.toml model.name='"transformer-small"' \
        train.run_dir="\"$WORK/ours\"" train.max_tokens=2800 train.lr=0.001 \
        train.warmup_steps=400 train.clip_norm=1.0 train.max_steps="$STEPS" \
        train.valid_every=500 train.keep_last=0 train.patience=0) > ours-train.log 2>&1
fi

# Both peers save their checkpoints as pickles that torch >= 2.6 refuses to load by default
# (weights_only); these are the peers' own checkpoints, just trained here.
export OMP_NUM_THREADS=2 MKL_NUM_THREADS=2
PEER=(env TORCH_FORCE_NO_WEIGHTS_ONLY_LOAD=1)
[ -n "${PAUSE_PID:-}" ] && kill -STOP "$PAUSE_PID" && trap 'kill -CONT "$PAUSE_PID"' EXIT
for run in 1 2; do
    /usr/bin/time -v -o "fairseq/decode-time$run.log" "${PEER[@]}" venv/bin/fairseq-generate \
        fairseq/bin --path fairseq/ckpt/checkpoint_last.pt --source-lang en --target-lang de \
        --gen-subset test --beam 5 --nbest 1 --max-len-a 1.5 --max-len-b 10 --batch-size 128 \
        --cpu --num-workers 0 > "fairseq/decode$run.log" 2>&1
    /usr/bin/time -v -o "onmt/decode-time$run.log" "${PEER[@]}" venv/bin/onmt_translate \
        -model "onmt/model_step_$STEPS.pt" -src data/test.en -output "onmt/test$run.de" \
        -beam_size 5 -batch_size 128 -batch_type sents -max_length_ratio 1.5 \
        -length_penalty wu -alpha 1.0 -report_time -gpu -1 > "onmt/decode$run.log" 2>&1
    for precision in auto int8; do
        (cd "$REPO" && .venv/bin/python benchmarks/bench.py --models transformer-small \
            --checkpoint "transformer-small=$WORK/ours/last.pt" --warmup-steps 0 --steps 1 \
            --beams 5 --decode-precision $precision --out "$WORK/ours-$precision-decode$run.json")
    done
done
for precision in auto int8; do
    (cd "$REPO" && .venv/bin/seq2seq evaluate --checkpoint "$WORK/ours/last.pt" \
        --beam 5 --batch-size 128 --precision $precision --output "$WORK/ours/test.$precision.de")
done
[ -n "${PAUSE_PID:-}" ] && kill -CONT "$PAUSE_PID"
cd "$REPO" && .venv/bin/python benchmarks/peers/decode_report.py "$WORK" "$STEPS"
