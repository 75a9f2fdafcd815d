#!/bin/bash
# Beam-5 decoding speed of fairseq, OpenNMT-py, CTranslate2 and ours side by side, at about
# equal BLEU (results/bench/peers-decode-*.json). Run from the repository root after
# `make data`:
#
#     bash benchmarks/peers/decode.sh [WORK_DIR [STEPS]]   # defaults ../peers and 1000 updates
#
# 1. Trains the model of measure.sh (Transformer 3+3, d_model 256, FFN 1024, 4 heads, pre-norm,
#    shared embeddings, dropout 0.3 / 0.1, label smoothing 0.1, Adam (0.9, 0.98), clip 1.0,
#    batches of about 2,500 target tokens) in each toolkit for STEPS updates with the same
#    schedule: linear warmup to 1e-3 over 400 updates, then inverse square root. Each toolkit
#    trains in its default precision on this CPU (ours: bf16 autocast where the CPU has
#    AVX512_BF16; the peers: fp32). A model already trained in WORK_DIR is kept. CTranslate2
#    decodes fairseq's model, converted by its own ct2-fairseq-converter with int8 weights.
# 2. Decodes the 1000 test sentences twice with each model: beam 5, batches of 128 sentences,
#    at most 1.5 x source length + 10 tokens (OpenNMT-py: + 5; CTranslate2: the limit of the
#    longest source of each batch, as fairseq), 2 threads, each in its default precision (the
#    PyTorch peers: fp32; ours: decode.precision auto, bf16 autocast where the CPU has
#    AVX512_BF16 or AMX), CTranslate2 in int8 (compute_type int8) and ours also in int8
#    (decode.precision int8); ours and OpenNMT-py rank finished hypotheses with the GNMT length
#    penalty (alpha 1), fairseq and CTranslate2 by the mean log-probability per token (their
#    length_penalty 1, the end of sentence counted). The time is each toolkit's own clock
#    around its decoding loop (model loading excluded): fairseq-generate's "Translated ... in
#    Xs", onmt_translate -report_time's "Total translation time", ours benchmarks/bench.py's
#    decoding time and CTranslate2's ct2_decode.py's (both after 16 untimed sentences; see
#    ct2_decode.py for how its length limit and ranking follow fairseq's).
#    Then the first 200 test sentences twice, one at a time (batch size 1, beam 5), each
#    sentence timed: ours and CTranslate2 by their own clocks around each batch, fairseq and
#    OpenNMT-py by timed_search.py around the call that decodes a batch in each.
#    Peak memory: the maximum resident set size of each decoding process (the peers': from
#    /usr/bin/time -v; ours: benchmarks/bench.py's, whose decoding runs in a process of its own).
# 3. Scores all outputs the same way (our sentencepiece model detokenizes the pieces, sacreBLEU
#    scores them against the test references), counts the output pieces of each by encoding
#    its text with our sentencepiece model, and writes the JSON (decode_report.py).
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
# (weights_only); these are the peers' own checkpoints, just trained here (hence also the
# converter's --unsafe_deserialization).
export OMP_NUM_THREADS=2 MKL_NUM_THREADS=2
PEER=(env TORCH_FORCE_NO_WEIGHTS_ONLY_LOAD=1)
if [ ! -f ct2/model/model.bin ]; then
    mkdir -p ct2
    venv/bin/ct2-fairseq-converter --model_path fairseq/ckpt/checkpoint_last.pt \
        --data_dir fairseq/bin --source_lang en --target_lang de --unsafe_deserialization \
        --quantization int8 --output_dir ct2/model --force > ct2/convert.log 2>&1
fi
TIMED=(venv/bin/python "$REPO/benchmarks/peers/timed_search.py")
[ -n "${PAUSE_PID:-}" ] && kill -STOP "$PAUSE_PID" && trap 'kill -CONT "$PAUSE_PID"' EXIT
for run in 1 2; do
    # "decode": the 1000 test sentences in batches of 128; "single": the first 200, one by one.
    for batch in 128 1; do
        if [ "$batch" = 128 ]; then
            name=decode src=data/test.en bin=fairseq/bin sentences=()
        else
            name=single src=data/first.en bin=fairseq/first
            sentences=(--decode-sentences "$FIRST_SENTENCES")
        fi
        # fairseq's default --required-batch-size-multiple 8 drops a sentence at batch size 1.
        /usr/bin/time -v -o "fairseq/$name-time$run.log" "${PEER[@]}" "${TIMED[@]}" \
            "fairseq/$name$run.json" fairseq-generate "$bin" \
            --path fairseq/ckpt/checkpoint_last.pt --source-lang en --target-lang de \
            --gen-subset test --beam 5 --nbest 1 --max-len-a 1.5 --max-len-b 10 \
            --batch-size "$batch" --required-batch-size-multiple 1 --cpu --num-workers 0 \
            > "fairseq/$name$run.log" 2>&1
        /usr/bin/time -v -o "onmt/$name-time$run.log" "${PEER[@]}" "${TIMED[@]}" \
            "onmt/$name$run.json" onmt_translate -model "onmt/model_step_$STEPS.pt" \
            -src "$src" -output "onmt/$name$run.de" -beam_size 5 -batch_size "$batch" \
            -batch_type sents -max_length_ratio 1.5 -length_penalty wu -alpha 1.0 \
            -report_time -gpu -1 > "onmt/$name$run.log" 2>&1
        /usr/bin/time -v -o "ct2/$name-time$run.log" venv/bin/python \
            "$REPO/benchmarks/peers/ct2_decode.py" ct2/model "$src" "ct2/$name$run.de" \
            "ct2/$name$run.json" --batch-size "$batch" > "ct2/$name$run.log" 2>&1
        for precision in auto int8; do
            (cd "$REPO" && .venv/bin/python benchmarks/bench.py --models transformer-small \
                --checkpoint "transformer-small=$WORK/ours/last.pt" --warmup-steps 0 \
                --steps 1 --beams 5 --decode-precision $precision --decode-batch-size "$batch" \
                "${sentences[@]}" --out "$WORK/ours-$precision-$name$run.json")
        done
    done
done
for precision in auto int8; do
    (cd "$REPO" && .venv/bin/seq2seq evaluate --checkpoint "$WORK/ours/last.pt" \
        --beam 5 --batch-size 128 --precision $precision --output "$WORK/ours/test.$precision.de")
done
[ -n "${PAUSE_PID:-}" ] && kill -CONT "$PAUSE_PID"
cd "$REPO" && .venv/bin/python benchmarks/peers/decode_report.py "$WORK" "$STEPS"
