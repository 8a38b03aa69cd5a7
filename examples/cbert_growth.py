"""Adapter growth in the first updates of CmplxBERT fine-tuning, one setting per call.

Fine-tunes the packaged MiniLM, complexified, on the docstring task (batch 16, 64 tokens, the
first 1,600 training examples in a fixed shuffle, AdamW with weight decay 0.01 (``--eps``),
``--warmup`` warm-up updates (10) then a constant rate, gradient clipping at 1) and probes,
after 0, 1, 2, 4, ..., 64 and the last update, 32 validation docstrings: the imaginary-to-real
energy of the last hidden states and the mean pairwise cosine of the sentence vectors. At the
end it scores 320 validation examples. One JSON line per call (appended to ``--out`` if
given). The table of docs/cmplxbert.md, "Adapter growth", comes from these calls, one thread
each:

    python examples/cbert_growth.py --start paper --init zero_b --ratio 1
    python examples/cbert_growth.py --start keep --init zero_b --ratio 1
    python examples/cbert_growth.py --start keep --init zero_a --ratio 0.3    # the defaults
    python examples/cbert_growth.py --score real --init zero_a --ratio 1
    ...
"""

from __future__ import annotations

import argparse
import json
import random
import time

import torch
from transformers import AutoTokenizer

from complexformer.cmplxbert import CmplxBertConfig, ComplexLoRAConfig, complexify
from complexformer.cmplxbert.analysis import imaginary_to_real, sentence_cosine
from complexformer.cmplxbert.finetune import MeanPooled
from complexformer.cmplxbert.labelled import load_classification_task
from complexformer.cmplxbert.loading import find_minilm_dir, load_hf_bert


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--start", default="keep", choices=("keep", "paper"), help="start")
    p.add_argument("--score", default="modulus", choices=("modulus", "real"),
                   help="attention score and head output")  # fmt: skip
    p.add_argument("--lr", type=float, default=1e-3, help="the new head's learning rate")
    p.add_argument("--ratio", type=float, default=0.3, help="the rest at lr × ratio")
    p.add_argument("--alpha", type=float, default=None, help="LoRA alpha (None: s = 1)")
    p.add_argument("--init", default="zero_a", choices=("zero_a", "zero_b"), help="factors")
    p.add_argument("--updates", type=int, default=100, help="updates (default 100)")
    p.add_argument("--warmup", type=int, default=10, help="warm-up updates (default 10)")
    p.add_argument("--eps", type=float, default=1e-8, help="AdamW eps (default 1e-8)")
    p.add_argument("--seed", type=int, default=0, help="seed")
    p.add_argument("--out", default=None, help="append the JSON line to this file")
    a = p.parse_args()
    torch.set_num_threads(1)
    torch.manual_seed(a.seed)
    task = load_classification_task("docstrings")
    tok = AutoTokenizer.from_pretrained(str(find_minilm_dir()))

    def encode(texts):
        return tok(texts, truncation=True, max_length=64, padding=True, return_tensors="pt")

    hf, _ = load_hf_bert("minilm", "classification", task.num_labels)
    lora = ComplexLoRAConfig(r=8, alpha=a.alpha, init=a.init)
    model_config = CmplxBertConfig(attention_score=a.score, head_output=a.score, start=a.start)
    cb = complexify(hf, lora, model_config)
    cb.classifier.base_layer.requires_grad_(True)
    model = MeanPooled(cb)
    tr_x, tr_y = task.splits["train"]
    order = list(range(len(tr_x)))
    random.Random(0).shuffle(order)
    order = order[:1600]
    va_x, va_y = task.splits["validation"]
    probe_in = encode(va_x[:32])

    @torch.no_grad()
    def probe(updates: int) -> dict:
        model.eval()
        h = cb(probe_in["input_ids"], attention_mask=probe_in["attention_mask"]).last_hidden_state
        model.train()
        mask = probe_in["attention_mask"]
        return {"updates": updates, "imag_to_real": imaginary_to_real(h, mask),
                "cosine": sentence_cosine(h, mask)}  # fmt: skip

    head = [p for n, p in model.named_parameters() if p.requires_grad and "classifier" in n]
    rest = [p for n, p in model.named_parameters() if p.requires_grad and "classifier" not in n]
    opt = torch.optim.AdamW(
        [{"params": rest, "lr": a.lr * a.ratio}, {"params": head, "lr": a.lr}],
        weight_decay=0.01,
        eps=a.eps,
    )
    sched = torch.optim.lr_scheduler.LambdaLR(opt, lambda s: min(1.0, (s + 1) / a.warmup))
    trace = [probe(0)]
    model.train()
    t0 = time.perf_counter()
    for s in range(a.updates):
        rows = [order[(s * 16 + j) % len(order)] for j in range(16)]
        enc = encode([tr_x[i] for i in rows])
        labels = torch.tensor([tr_y[i] for i in rows])
        loss = model(enc["input_ids"], enc["attention_mask"], labels=labels).loss
        loss.backward()
        torch.nn.utils.clip_grad_norm_(rest + head, 1.0)
        opt.step()
        sched.step()
        opt.zero_grad()
        if (s + 1) & s == 0 or s + 1 == a.updates:
            trace.append(probe(s + 1))
    model.eval()
    correct = 0
    with torch.no_grad():
        for i in range(0, 320, 32):
            enc = encode(va_x[i : i + 32])
            pred = model(enc["input_ids"], enc["attention_mask"]).logits.argmax(-1)
            correct += int((pred == torch.tensor(va_y[i : i + 32])).sum())
    res = {"settings": vars(a), "trace": trace, "val_accuracy": correct / 320,
           "seconds": time.perf_counter() - t0}  # fmt: skip
    line = json.dumps(res)
    print(line)
    if a.out:
        with open(a.out, "a", encoding="utf-8") as f:
            f.write(line + "\n")


if __name__ == "__main__":
    main()
