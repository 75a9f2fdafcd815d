"""Training a model: the loop, the loss, checkpoints and everything a run needs to resume.

`loop` is the training loop, read top to bottom; `run` sets a run up (data, model, optimizer,
schedule) and resumes it; `loss` is label-smoothed cross-entropy; `validation` scores the model
while it trains; `checkpoint` saves and reads checkpoints without running code from them; the
rest keeps a run safe (`run_lock`, `signals`, `reproducibility`), readable (`run_log`) and
spread over several GPUs (`distributed`).
"""
