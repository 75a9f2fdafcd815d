#!/usr/bin/env bash
# The GPU benchmark, for a bare machine with a CUDA GPU and PyTorch but no internet: the
# project's dependencies installed, the prepared corpus carried, this repository run in place
# (PYTHONPATH=., no install). From the repository root:
#
#     bash benchmarks/gpu.sh              # on a GPU; its training stops after 5 minutes
#     bash benchmarks/gpu.sh --dry-run    # a few minutes on a CPU: every step, tiny, as a check
#
# Steps: (1) benchmarks/bench.py: training target tokens/s and peak GPU memory of each preset,
# timed after a warm-up of 300 steps (over two epochs of 127 batches: every batch shape met);
# (2) benchmarks/gpu_syncs.py: the times each of 60 uncompiled steps of CONFIG made the host
# wait for the GPU (none but at the log lines, every 20 steps, is the aim);
# (3) a model trained with CONFIG (the GPU speed recipe by default), validated
# with beam 5, the device's memory sampled meanwhile, every validation's checkpoint kept;
# (4) its best checkpoint decodes the test set with beam 5 and with greedy search in bf16, in
# batches of up to 1,024 sentences (seq2seq evaluate: the command's time, start-up included),
# and so does, with beam 5, the first checkpoint whose valid BLEU reached 40;
# (5) benchmarks/gpu_decode.py: the best checkpoint decodes the test set again, warm, with beam 1
# and 5, timed, the host's waits of each decoding step counted, and 200 sentences also with the
# textbook searches, which read the device after every step, for comparison;
# (6) benchmarks/gpu_profile.py: CONFIG trained uncompiled for 30 untimed steps (every length
# bucket met), 10 timed and 10 under torch.profiler, and the best checkpoint's beam-5 decoding of
# the test set, warm, under it too: wall time, the GPU's busy time, kernel launches and aten
# operators per step, and the operators that take the most GPU and host time.
# benchmarks/gpu_report.py then writes results/bench/gpu-<device>-<time>.json: seconds from the
# training command's start to a valid BLEU of 35 and of 40, to a test BLEU from the first
# checkpoint at 40 (its validation's time plus the test decoding's command) and to the best
# checkpoint's beam-5 test score, target tokens/s, model FLOPs utilisation, peak memory and
# sentences/s (the command's, and the warm decoder's), and the profile, with the device named.
#
# Environment: DATA (default data/multi30k.en-de), CONFIG (default
# configs/transformer.multi30k.en-de.gpu.toml), STEPS (default: the config's train.max_steps),
# TRAIN_SECONDS (default 300: training stops after this long, at its step count otherwise;
# the checkpoints of its validations so far stand), OUT_DIR (default results/bench), PYTHON
# (default python3), WORK_DIR (where the steps' files stay; default a temporary folder, removed
# at the end), RESUME (1: steps 1 and 2 are not run again where WORK_DIR holds their bench.json
# and syncs.json, as after a change that touches training and decoding only; the record names
# the run they came from; steps 3 to 6 always run), TRAIN_ARGS (KEY=VALUE overrides of CONFIG
# for the training of steps 3 and 6, e.g. TRAIN_ARGS="train.max_tokens=16384 train.lr=0.01
# train.warmup_steps=500": a variant of the recipe without a file of its own; the record's
# command and changes name them).
set -euo pipefail
cd "$(dirname "$0")/.."
export PYTHONPATH=".${PYTHONPATH:+:$PYTHONPATH}"
PY=${PYTHON:-python3}
settings="" # the settings this run was given, which its record's command names
for name in CONFIG STEPS TRAIN_SECONDS RESUME; do
    if [ -n "${!name:-}" ]; then settings+="$name=${!name} "; fi
done
DATA=${DATA:-data/multi30k.en-de}
CONFIG=${CONFIG:-configs/transformer.multi30k.en-de.gpu.toml}
OUT_DIR=${OUT_DIR:-results/bench}
TRAIN_SECONDS=${TRAIN_SECONDS:-300}

dry_run=false
case "${1:-}" in
    "") ;;
    --dry-run) dry_run=true ;;
    *) echo "error: unknown option $1 (expected --dry-run or nothing)" >&2; exit 2 ;;
esac
if [ ! -f "$DATA/manifest.json" ]; then
    echo "error: $DATA: not a prepared corpus; prepare it (make data) and carry it here" >&2
    exit 2
fi

# WORK_DIR keeps each step's files (they are removed otherwise)
work=${WORK_DIR:-$(mktemp -d)}
mkdir -p "$work"
sampler=""
stop_sampler() { if [ -n "$sampler" ]; then kill "$sampler" 2>/dev/null || true; sampler=""; fi; }
trap 'stop_sampler; [ -n "${WORK_DIR:-}" ] || rm -rf "$work"' EXIT
if $dry_run; then
    device=cpu
    steps=${STEPS:-4}
    # uncompiled and fp32: inductor takes minutes on a CPU, and bf16 is slow without AVX-512;
    # batches of 512 tokens: a CPU steps through them in a fraction of a second
    train_args=(train.valid_every=2 train.valid_max_sentences=10 train.warmup_steps=2
        train.log_every=1 train.compile=false train.precision=fp32 train.max_tokens=512)
    bench_args=(--quick --models transformer-tiny --decode-sentences 10 --beams 5
        --precision fp32 --max-tokens 512)
    sync_args=(train.precision=fp32 train.max_tokens=512 train.warmup_steps=2 train.max_steps=6
        train.log_every=2 train.valid_every=6 train.valid_max_sentences=4)
    test_target=0 # the first validation's checkpoint decodes the test set again
    decode_args=(--precision fp32 --sync-sentences 10)
    test_precision=fp32
    profile_args=(--warmup 2 --steps 2 --precision fp32 train.precision=fp32
        train.max_tokens=512 train.warmup_steps=2 train.valid_max_sentences=4)
else
    device=cuda
    steps=${STEPS:-0}
    train_args=()
    bench_args=(--models transformer-tiny transformer-small gru --beams 5 --decode-sentences 200
        --warmup-steps 300)
    sync_args=(train.max_steps=60 train.warmup_steps=30 train.log_every=20 train.valid_every=60
        train.valid_max_sentences=16)
    test_target=40
    decode_args=(--precision bf16 --textbook-too)
    test_precision=bf16
    profile_args=(train.valid_max_sentences=16)
fi
if [ "$steps" != 0 ]; then train_args+=("train.max_steps=$steps"); fi
read -r -a variant <<<"${TRAIN_ARGS:-}"
train_args+=(${variant[@]+"${variant[@]}"})
profile_args+=(${variant[@]+"${variant[@]}"})
read -r src tgt < <($PY -c "import json, sys; m = json.load(open(sys.argv[1])); print(m['src'], m['tgt'])" "$DATA/manifest.json")
sentences=$($dry_run && echo 10 || wc -l <"$DATA/test.$src")
head -n "$sentences" "$DATA/test.$src" >"$work/test.src"
head -n "$sentences" "$DATA/test.$tgt" >"$work/test.ref"

kept() { [ "${RESUME:-}" = 1 ] && [ -f "$work/$1" ] && echo "(kept from an earlier run: $work/$1)"; }

echo "== 1/6 training throughput and memory (benchmarks/bench.py)"
kept bench.json ||
    $PY benchmarks/bench.py --device "$device" --data "$DATA" "${bench_args[@]}" --out "$work/bench.json"

echo "== 2/6 host synchronisations per training step (benchmarks/gpu_syncs.py, $CONFIG)"
kept syncs.json ||
    $PY benchmarks/gpu_syncs.py --config "$CONFIG" --out "$work/syncs.json" \
        "data.prepared=$DATA" "train.device=$device" "train.run_dir=$work/syncs-run" \
        train.compile=false train.log_every_seconds=0 train.attention_history=0 "${sync_args[@]}"

echo "== 3/6 training to BLEU ($CONFIG)"
if command -v nvidia-smi >/dev/null && ! $dry_run; then
    nvidia-smi --query-gpu=memory.used --format=csv,noheader,nounits -lms 500 >"$work/memory.csv" &
    sampler=$!
fi
rm -rf "$work/run" "$work/decode-first.json" # a training run of its own, also when resumed
date +%s.%N >"$work/start"
# stopped after TRAIN_SECONDS as Ctrl-C stops it (SIGTERM: the update ends, last.pt is saved)
status=0
timeout --signal=TERM --kill-after=120 "$TRAIN_SECONDS" $PY seq2seq train --config "$CONFIG" \
    "data.prepared=$DATA" "train.device=$device" "train.run_dir=$work/run" \
    decode.valid_beam_size=5 train.keep_last=1000 "${train_args[@]}" || status=$?
if [ "$status" != 0 ] && [ "$status" != 124 ]; then exit "$status"; fi
date +%s.%N >"$work/end"
stop_sampler

echo "== 4/6 decoding the test set ($test_precision): the best checkpoint, the first at valid BLEU 40"
evaluate() { # CHECKPOINT BEAM OUT
    $PY seq2seq evaluate --checkpoint "$1" --device "$device" --precision "$test_precision" --beam "$2" \
        --batch-size 1024 --src "$work/test.src" --ref "$work/test.ref" --json >"$3"
}
for beam in 5 1; do
    evaluate "$work/run/best.pt" "$beam" "$work/decode-beam$beam.json"
    if [ "$beam" = 5 ]; then date +%s.%N >"$work/tested"; fi
done
first=$($PY benchmarks/gpu_report.py "$work" --first-step-at "$test_target")
if [ -n "$first" ]; then
    date +%s.%N >"$work/first-start"
    evaluate "$work/run/step-$first.pt" 5 "$work/decode-first.json"
    date +%s.%N >"$work/first-end"
fi

echo "== 5/6 warm decoding: sentences/s and host synchronisations per step (benchmarks/gpu_decode.py)"
$PY benchmarks/gpu_decode.py --checkpoint "$work/run/best.pt" --src "$work/test.src" \
    --device "$device" --beams 1 5 "${decode_args[@]}" --out "$work/decode.json"

echo "== 6/6 profile of a training step and a decoding batch (benchmarks/gpu_profile.py)"
rm -rf "$work/profile-run" "$work/profile.json" # a run of its own, also when resumed
# a profile that fails costs the record its profile only (gpu_report.py: "profile": null)
$PY benchmarks/gpu_profile.py --config "$CONFIG" --checkpoint "$work/run/best.pt" \
    --src "$work/test.src" --out "$work/profile.json" "data.prepared=$DATA" \
    "train.device=$device" "train.run_dir=$work/profile-run" train.compile=false \
    train.log_every_seconds=0 train.attention_history=0 "${profile_args[@]}" ||
    echo "warning: the profile failed (status $?); the record has none" >&2

$PY benchmarks/gpu_report.py "$work" --out-dir "$OUT_DIR" --train-args "${TRAIN_ARGS:-}" \
    --command "$settings${TRAIN_ARGS:+TRAIN_ARGS='$TRAIN_ARGS' }bash benchmarks/gpu.sh${1:+ $1}" \
    --config "$CONFIG" --test-target "$test_target"
