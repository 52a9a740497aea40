"""What the Hugging Face peers (hf_glue_peer.py, hf_squad_peer.py, hf_ner_peer.py) share: the
training stream, step, optimizer and schedule, the step timing and the paired replay.

Kind: the peers' shared module (benchmarks/peers/), imported as benchmarks.peers.hf_peer (the
repository root on the path), never run; prints only what its callers ask (the step timing's
JSON line). torch and transformers only."""
import json
import random
import sys
import time

import numpy as np
import torch
import transformers
import transformers.trainer_pt_utils

from benchmarks import recipes


def add_training_options(parser, padding: str | None) -> None:
  """The options of every peer's training beside the recipe's: threads, the device, the
  schedule, the batches (`padding` the default: the transformers example script's; None: no
  choice, as SQuAD's windows), step timing, the paired replay."""
  parser.add_argument("--threads", type=int, default=2)
  parser.add_argument("--device", default="cpu",
                      help="The torch device to fine-tune and predict on (cuda: a GPU).")
  parser.add_argument("--original_schedule", action="store_true",
                      help="Decay the learning rate from step 0 as google-research/bert "
                      "does, instead of from the end of warmup as transformers does.")
  if padding:
    parser.add_argument("--padding", choices=("max_length", "longest"), default=padding,
                        help="max_length: every batch padded to max_seq_length; longest: each "
                        "batch to its longest sequence (Trainer's dynamic padding).")
    parser.add_argument("--group_by_length", action="store_true",
                        help="Trainer's --group_by_length: batches of similar lengths.")
  parser.add_argument("--time_steps", type=int, default=0,
                      help="Only time this many training steps on one batch (after as many "
                      "untimed).")
  parser.add_argument("--replay_file", help="Replay bert_tf's steps from this .npz.")
  parser.add_argument("--replay_dropout", action="store_true",
                      help="Keep the model's dropout in the replay.")
  parser.add_argument("--replay_eval", action="store_true",
                      help="Score the replayed model on the evaluation data.")


def impl() -> str:
  return f"hf_transformers {transformers.__version__} torch {torch.__version__}"


def batches(data, batch_size, num_steps, seed, padding="max_length", group_by_length=False):
  """num_steps batches of indices from a stream of reshuffled epochs (remainders carry on).

  The data come padded to max_length. padding="longest" cuts each batch to its longest
  sequence, as transformers' DataCollatorWithPadding pads (Trainer's dynamic padding);
  group_by_length orders each epoch with Trainer's LengthGroupedSampler (megabatches of 50
  batches sorted by length; --group_by_length).
  """
  rng = random.Random(seed)
  n = len(data["input_ids"])
  lengths = data["attention_mask"].sum(-1)
  generator = torch.Generator().manual_seed(seed)
  stream = []
  for _ in range(num_steps):
    while len(stream) < batch_size:
      if group_by_length:
        order = list(transformers.trainer_pt_utils.LengthGroupedSampler(
            batch_size, lengths=lengths.tolist(), generator=generator))
      else:
        order = list(range(n))
        rng.shuffle(order)
      stream += order
    idx, stream = stream[:batch_size], stream[batch_size:]
    batch = {k: v[idx] for k, v in data.items()}
    if padding == "longest":
      longest = int(lengths[idx].max())
      # Contiguous, as the collator's fresh tensors are (token classification views labels).
      batch = {k: v[:, :longest].contiguous() if v.dim() == 2 else v for k, v in batch.items()}
    yield batch


def on_model_device(model, batch: dict) -> dict:
  """The batch's tensors on the model's device (a no-op on the CPU)."""
  return {k: v.to(model.device) for k, v in batch.items()}


def train_step(model, optimizer, batch):
  loss = model(**on_model_device(model, batch)).loss
  loss.backward()
  torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
  optimizer.step()
  optimizer.zero_grad()
  return loss


def parse_args(parser, default_recipe: str, padding: str | None):
  """The peer's arguments: the parser's own, the shared training options
  (`add_training_options`) and one for each of the recipe's settings (`recipes.parse_args`);
  torch set to --threads and --seed."""
  add_training_options(parser, padding)
  args = recipes.parse_args(parser, default_recipe)
  torch.set_num_threads(args.threads)
  torch.manual_seed(args.seed)
  return args


def fine_tune(model, data, num_steps: int, args, **batching) -> bool:
  """Trains the model num_steps on --device, on the data's batches as the recipe says
  (`batching`: the padding and grouping of `batches`); with --time_steps only times that many
  steps and returns False. The model stays on --device, for the prediction after."""
  model.to(args.device)
  optimizer, schedule = build_optimizer(model, args.learning_rate, num_steps,
                                        args.original_schedule, args.warmup_proportion)
  model.train()
  if args.time_steps:
    time_steps(model, optimizer, next(batches(data, args.train_batch_size, 1, args.seed)),
               args.time_steps)
    return False
  train(model, optimizer, schedule,
        batches(data, args.train_batch_size, num_steps, args.seed, **batching), num_steps)
  return True


def train(model, optimizer, schedule, stream, num_steps: int) -> None:
  """The training steps over the batches of `stream`, the learning rate scheduled after each,
  logging the running mean loss every 50 steps (as bert_tf's training log) to stderr."""
  losses = []
  for step, batch in enumerate(stream, 1):
    losses.append(train_step(model, optimizer, batch).item())
    if step % 50 == 0 or step == num_steps:
      print(f"step {step}/{num_steps} | loss {np.mean(losses):.4f} | learning_rate "
            f"{schedule.get_last_lr()[0]:.3e}", file=sys.stderr, flush=True)
      losses = []
    schedule.step()


def synchronize(model) -> None:
  """Waits for the model's GPU to finish what was queued (its kernels run asynchronously, so a
  clock read without this would time the queueing); nothing on the CPU."""
  if model.device.type == "cuda":
    torch.cuda.synchronize(model.device)


def time_steps(model, optimizer, batch, num_steps):
  """Prints the ms per training step over num_steps, after as many untimed."""
  for _ in range(num_steps):
    train_step(model, optimizer, batch)
  synchronize(model)
  start = time.time()
  for _ in range(num_steps):
    train_step(model, optimizer, batch)
  synchronize(model)
  ms = 1000 * (time.time() - start) / num_steps
  print(json.dumps({"impl": impl(), "steps_timed": num_steps,
                    "batch_shape": list(batch["input_ids"].shape), "ms_per_step": round(ms, 1),
                    "examples_per_s": round(len(batch["input_ids"]) / ms * 1000, 2)}))


def build_optimizer(model, learning_rate: float, num_steps: int, original_schedule: bool,
                    warmup_proportion: float):
  """AdamW (eps 1e-6, weight decay 0.01 except biases and LayerNorm), a linear warmup over
  warmup_proportion of the steps (the recipes' 10%), then linear decay: transformers' (decay
  from the end of warmup), or with original_schedule google-research/bert's and bert_tf's
  (decay computed from step 0)."""
  no_decay = ("bias", "LayerNorm.weight")
  groups = [{"params": [p for n, p in model.named_parameters()
                        if not any(k in n for k in no_decay)], "weight_decay": 0.01},
            {"params": [p for n, p in model.named_parameters()
                        if any(k in n for k in no_decay)], "weight_decay": 0.0}]
  optimizer = torch.optim.AdamW(groups, lr=learning_rate, eps=1e-6)
  warmup = int(num_steps * warmup_proportion)
  if original_schedule:
    schedule = torch.optim.lr_scheduler.LambdaLR(
        optimizer, lambda step: step / warmup if step < warmup else 1 - step / num_steps)
  else:
    schedule = transformers.get_linear_schedule_with_warmup(optimizer, warmup, num_steps)
  return optimizer, schedule


def replay_config(dropout: bool) -> dict:
  """from_pretrained's overrides for a replay: without dropout unless kept."""
  return {} if dropout else dict(hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0)


def replay_steps(model, head, saved, batch_of, learning_rate: float, original_schedule: bool,
                 warmup_proportion: float):
  """bert_tf's paired replay (benchmarks/parity/replay.py) on this side: `head` (a torch Linear)
  takes the saved initial kernel and bias, then the saved batches (batch_of(saved, i): the
  model's keyword arguments of step i) train the model under the replay's schedule. Returns
  the loss of each step."""
  with torch.no_grad():
    head.weight.copy_(torch.from_numpy(saved["head_kernel"].T))
    head.bias.copy_(torch.from_numpy(saved["head_bias"]))
  optimizer, schedule = build_optimizer(model, learning_rate, int(saved["total_steps"]),
                                        original_schedule, warmup_proportion)
  model.train()
  losses = []
  for i in range(int(saved["num_steps"])):
    batch = {k: torch.from_numpy(v.astype(np.int64)) for k, v in batch_of(saved, i).items()}
    losses.append(round(train_step(model, optimizer, batch).item(), 5))
    schedule.step()
  return losses
