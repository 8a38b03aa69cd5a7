"""Train the complex ViT on scikit-learn's bundled 8x8 handwritten digits (offline, CPU).

The 1,797 real 8x8 images are lifted to complex (Im = 0) by the model itself; 2x2 patches give
16 tokens plus a class token; the logits are the modulus of the complex head output, trained
with ordinary cross-entropy. Takes well under a minute on 2 CPU cores and prints the test
accuracy (>= 90% expected; typically ~97%).

    python examples/vit_digits.py                    # default: learned positions
    python examples/vit_digits.py --pos-encoding rotary --score modulus

Needs scikit-learn (the ``examples`` extra: ``pip install -e ".[examples]"``).
"""

from __future__ import annotations

import argparse
import math
import sys
import time
from pathlib import Path

import torch
import torch.nn.functional as F

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from complexformer.models.vit import ViT  # noqa: E402


def load_digits_tensors(seed: int) -> tuple[torch.Tensor, ...]:
    """Stratified 75/25 split of sklearn's digits, standardised with train statistics."""
    try:
        from sklearn.datasets import load_digits
        from sklearn.model_selection import train_test_split
    except ImportError as exc:  # pragma: no cover - optional dependency
        raise SystemExit("this example needs scikit-learn: pip install scikit-learn") from exc
    data = load_digits()
    x = torch.tensor(data.images, dtype=torch.float32).unsqueeze(1)  # (N, 1, 8, 8)
    y = torch.tensor(data.target, dtype=torch.long)
    idx_tr, idx_te = train_test_split(
        torch.arange(len(y)).numpy(), test_size=0.25, random_state=seed, stratify=y.numpy()
    )
    x_tr, x_te, y_tr, y_te = x[idx_tr], x[idx_te], y[idx_tr], y[idx_te]
    mean, std = x_tr.mean(), x_tr.std()
    return (x_tr - mean) / std, (x_te - mean) / std, y_tr, y_te


@torch.no_grad()
def accuracy(model: ViT, x: torch.Tensor, y: torch.Tensor) -> float:
    model.eval()
    return (model(x).argmax(-1) == y).float().mean().item()


def main(argv: list[str] | None = None) -> float:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--epochs", type=int, default=30)
    p.add_argument("--batch-size", type=int, default=64)
    p.add_argument("--lr", type=float, default=3e-3)
    p.add_argument("--dim", type=int, default=32)
    p.add_argument("--depth", type=int, default=2)
    p.add_argument("--heads", type=int, default=4)
    p.add_argument("--pos-encoding", default="learned", choices=("learned", "sinusoidal", "rotary"))
    p.add_argument("--score", default="real", choices=("real", "modulus", "split", "phase"))
    p.add_argument("--logits", default="modulus", choices=("modulus", "real"))
    p.add_argument("--seed", type=int, default=0)
    p.add_argument(
        "--threads",
        type=int,
        default=1,
        help="torch intra-op threads (default 1: the model is tiny, and extra "
        "threads only add synchronisation, badly so on a busy machine)",
    )
    args = p.parse_args(argv)
    if args.threads:
        torch.set_num_threads(args.threads)
    torch.manual_seed(args.seed)
    x_tr, x_te, y_tr, y_te = load_digits_tensors(args.seed)
    model = ViT(
        image_size=8,
        patch_size=2,
        in_channels=1,
        num_classes=10,
        dim=args.dim,
        depth=args.depth,
        heads=args.heads,
        mlp_dim=2 * args.dim,
        dropout=0.0,
        score=args.score,
        pos_encoding=args.pos_encoding,
        logits=args.logits,
    )
    n_params = sum(p.numel() for p in model.parameters())
    opt = torch.optim.AdamW(model.parameters(), lr=args.lr, weight_decay=0.01)
    steps_per_epoch = math.ceil(len(y_tr) / args.batch_size)
    total = args.epochs * steps_per_epoch
    sched = torch.optim.lr_scheduler.OneCycleLR(
        opt, max_lr=args.lr, total_steps=total, pct_start=0.1
    )
    print(
        f"complex ViT on sklearn digits: {len(y_tr)} train / {len(y_te)} test images, "
        f"{n_params} real parameters, pos_encoding={args.pos_encoding}, score={args.score}"
    )
    t0 = time.perf_counter()
    for epoch in range(args.epochs):
        model.train()
        perm = torch.randperm(len(y_tr))
        total_loss = 0.0
        for i in range(0, len(y_tr), args.batch_size):
            idx = perm[i : i + args.batch_size]
            loss = F.cross_entropy(model(x_tr[idx]), y_tr[idx])
            opt.zero_grad(set_to_none=True)
            loss.backward()
            opt.step()
            sched.step()
            total_loss += loss.item() * len(idx)
        if (epoch + 1) % 5 == 0 or epoch == 0:
            print(
                f"epoch {epoch + 1:3d}  loss {total_loss / len(y_tr):.4f}  "
                f"test acc {accuracy(model, x_te, y_te):.4f}  ({time.perf_counter() - t0:.1f} s)"
            )
    acc = accuracy(model, x_te, y_te)
    print(f"test accuracy: {acc:.4f} ({acc * 100:.1f}%) in {time.perf_counter() - t0:.1f} s")
    return acc


if __name__ == "__main__":
    main()
