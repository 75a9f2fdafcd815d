"""Training a model: the loop, the loss, checkpoints and everything a run needs to resume.

    loop.py               the training loop, read top to bottom
    step.py               one training step: loss, backward, clipping, AdamW, the schedule
    loss.py               label-smoothed cross-entropy over the target tokens
    run.py                a run's setup (model, optimizer, schedule)
    run_data.py           its prepared corpus, loaded and checked against the configuration
    resume.py             starting a run: resuming from last.pt, or a new one
    saving.py             when the loop validates and saves, and what a checkpoint holds
    progress_report.py    the progress bar and the log lines
    validation.py         scoring the model while it trains: loss, BLEU, chrF, sample maps
    attention_history.py  the attention of a few valid sentences at each validation, for
                          `seq2seq explore --run`
    checkpoint.py         writing checkpoints atomically: step, best, last, and averages

What keeps a run safe, readable and spread over several GPUs:

    run_lock.py           one writer per run folder
    signals.py            stopping cleanly on Ctrl-C or SIGTERM
    reproducibility.py    seeds and random-number-generator states, so a resume replays exactly
    run_log.py            the plain-text log and the TensorBoard event files
    distributed.py        several GPUs or nodes through `torchrun`
"""
