"""A compute ladder: does CMHA's gain over RoPE grow, hold or fade with scale?

Three variants of Shao et al., "ComplexFormer: Disruptively Advancing Transformer Inference
Ability via Head-Specific Complex Vector Attention" (2025) -- RoPE, CMHA without the phase
contrastive loss (``cmha_nopcl``) and the full ComplexFormer with PCL on the semantic phases
(``cmha``) -- are trained at several model sizes (rungs), on each corpus, with several seeds.
Everything but the shape and the number of steps is the same on every rung.

**Tokens grow with the size** by one rule: steps = round(S_ref · sqrt(N / N_ref)), N the
non-embedding parameters (the blocks), so the tokens D grow as N^0.5 and the compute
C = 6 · N · D (Kaplan et al., "Scaling Laws for Neural Language Models", 2020) as N^1.5. The
reference rung of the CPU ladder is the model and budget of ``reproduce --scale tiny``
(Table 4 of docs/RESULTS.md: 2 layers, d_model 128, 250 steps of 16 × 128 tokens).

**Layout**: ``OUT/<corpus>/<rung>/<variant>/seed<k>`` per run (a :mod:`complexformer.lm` run
directory, resumable; a finished one is skipped), its evaluation in
``RUN/eval/ladder-<key>.json``; ``OUT/ladder.md``, ``ladder.json`` and ``ladder.png`` from the
runs found. One lock per corpus folder, so two processes can train two corpora side by side.

**Evaluation** per run: validation and test perplexity (the first ``ppl_max_blocks`` blocks of
each split) and the length-extrapolation suite at 1, 2 and 4 × the training length (ratios
ppl(m·T) / ppl(T)). The analysis is in :mod:`.ladder_report` and :mod:`.ladder_fit`.
"""

from __future__ import annotations

import contextlib
import json
import math
import os
import re
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import torch

from complexformer.data import parse_data_spec
from complexformer.evaluation.extrapolation import ExtrapolationConfig, run_extrapolation_suite
from complexformer.lm import load_run, train
from complexformer.models import ComplexFormerLM
from complexformer.models.config import GPTConfig, preset_fields, unknown_key_error
from complexformer.results import write_json
from complexformer.runtime import cpu_settings
from complexformer.storage import open_file
from complexformer.training import evaluate_perplexity
from complexformer.training.config import TrainConfig
from complexformer.training.dist import env_world, resolve_device
from complexformer.training.rundir import run_lock

from ..configs import lab_configs
from .budget import gpu_hours, train_flops_per_token
from .evaluate import EvalContext, settings_key
from .ladder_report import write_ladder_report
from .plan import PlannedRun, check_run_settings
from .variants import SCALES, VARIANTS

__all__ = [
    "LADDERS",
    "LADDER_VARIANTS",
    "Ladder",
    "LadderConfig",
    "LadderRun",
    "Rung",
    "format_ladder_plan",
    "get_ladder",
    "plan_ladder",
    "run_ladder",
]

#: The variants of every rung: the baseline, CMHA without PCL, the full ComplexFormer.
LADDER_VARIANTS: tuple[str, ...] = ("rope", "cmha_nopcl", "cmha")


@dataclass(frozen=True)
class Rung:
    """One model size of a ladder.

    Attributes:
        name: the rung's folder name (``d64``, ``paper`` ...).
        n_layer, d_model, n_head, d_ff: the shape (every other field is the ladder's).
    """

    name: str
    n_layer: int
    d_model: int
    n_head: int
    d_ff: int

    def shape(self) -> dict[str, int]:
        return {
            "n_layer": self.n_layer,
            "d_model": self.d_model,
            "n_head": self.n_head,
            "d_ff": self.d_ff,
        }


@dataclass(frozen=True)
class Ladder:
    """Everything that is the same on every rung, variant and seed of a ladder.

    Attributes:
        name: ``tiny`` (the CPU ladder) or ``paper`` (the GPU rungs).
        description: one line for the plan.
        corpora: the data specs trained on (``--data`` picks one).
        tokenizer: TrainConfig.tokenizer (None: a byte-level BPE of ``vocab_size`` per corpus).
        vocab_size: the BPE's vocabulary (or the named tokenizer's, for the budget).
        model: GPTConfig fields shared by the rungs (context, dropout, ω schedule ...).
        rungs: the sizes, smallest first.
        reference: the rung whose steps are ``reference_steps``.
        reference_steps: S_ref of the token rule.
        train: TrainConfig fields (batch, optimizer, schedule; not ``max_steps``).
        evals_per_run: validation evaluations during training (eval_every = steps / this).
        ppl_batch_size: blocks per forward pass of the val/test perplexity.
        ppl_max_blocks: blocks of each split scored (None: all).
        extrapolation: ExtrapolationConfig fields (multipliers, max_tokens, batch_size).
        target: the model configuration the fits are extrapolated to (a preset name).
        cpu_flops: effective training FLOP/s of the development machine's 2 cores, for the
            plan's time estimate (None: estimate GPU-hours instead).
        flush_denormal: flush denormals on CPU (the PCL's gradients, see ``Scale``).
    """

    name: str
    description: str
    corpora: tuple[str, ...]
    tokenizer: str | None
    vocab_size: int
    model: dict[str, Any]
    rungs: tuple[Rung, ...]
    reference: str
    reference_steps: int
    train: dict[str, Any]
    evals_per_run: int = 4
    ppl_batch_size: int = 16
    ppl_max_blocks: int | None = 200
    extrapolation: dict[str, Any] = field(default_factory=dict)
    target: str = "paper"
    cpu_flops: float | None = None
    flush_denormal: bool = True

    def __post_init__(self) -> None:
        names = [r.name for r in self.rungs]
        if len(set(names)) != len(names) or self.reference not in names:
            raise ValueError(
                f"ladder {self.name!r}: rung names {names}, reference {self.reference!r}"
            )
        for key in self.train:
            if key not in TrainConfig.field_names() or key in ("max_steps", "out_dir", "seed"):
                raise ValueError(f"Ladder.train cannot set {key!r}")

    def rung(self, name: str) -> Rung:
        for r in self.rungs:
            if r.name == name:
                return r
        raise unknown_key_error(name, [r.name for r in self.rungs], "rung")

    def model_config(self, rung: Rung, variant: str) -> GPTConfig:
        """The variant's GPTConfig on this rung."""
        return GPTConfig(
            vocab_size=self.vocab_size,
            **{**self.model, **rung.shape(), **VARIANTS[variant].overrides()},
        )

    def non_embedding_params(self, rung: Rung) -> int:
        """N: the parameters of the blocks (RoPE variant; CMHA adds 2 per head and
        frequency)."""
        return _count_params(self.model_config(rung, "rope"))[0]

    def total_params(self, rung: Rung) -> int:
        return _count_params(self.model_config(rung, "rope"))[1]

    def target_compute(self) -> dict[str, Any]:
        """The compute the fits are extrapolated to: the target preset (``paper``: 8 layers,
        d_model 512) with the ladder's token rule, D = D_ref · sqrt(N / N_ref)."""
        fields = {k: v for k, v in preset_fields(self.target).items() if v is not None}
        n, total = _count_params(GPTConfig(**fields))
        ref = self.rung(self.reference)
        d = self.tokens(ref) * math.sqrt(n / self.non_embedding_params(ref))
        return {
            "preset": self.target,
            "non_embedding_params": n,
            "params": total,
            "tokens": d,
            "compute": 6.0 * n * d,
        }

    def steps(self, rung: Rung) -> int:
        """round(S_ref · sqrt(N / N_ref)), at least 1 (the token rule)."""
        ref = self.non_embedding_params(self.rung(self.reference))
        n = self.non_embedding_params(rung)
        return max(1, round(self.reference_steps * math.sqrt(n / ref)))

    def tokens(self, rung: Rung) -> int:
        """Training tokens: steps × batch × context."""
        return self.steps(rung) * int(self.train["batch_size"]) * int(self.model["max_seq_len"])

    def compute(self, rung: Rung) -> float:
        """C = 6 · N · D (non-embedding FLOPs, Kaplan et al. 2020)."""
        return 6.0 * self.non_embedding_params(rung) * self.tokens(rung)

    def train_config(
        self,
        rung: Rung,
        out_dir: str | os.PathLike,
        seed: int,
        data: str,
        *,
        device: str = "auto",
        num_threads: int | None = None,
        bf16: bool = False,
    ) -> TrainConfig:
        steps = self.steps(rung)
        every = max(1, steps // self.evals_per_run)
        return TrainConfig(
            out_dir=os.fspath(out_dir),
            data=data,
            tokenizer=self.tokenizer,
            vocab_size=self.vocab_size,
            seed=seed,
            device=device,
            num_threads=num_threads,
            max_steps=steps,
            eval_every=every,
            save_every=max(every, steps // 2),
            bf16=bf16,
            **self.train,
        )

    def extrapolation_settings(self) -> dict[str, Any]:
        return {
            "multipliers": [1, 2, 4],
            "max_tokens": 8192,
            "batch_size": 8,
            "split": "val",
            **self.extrapolation,
        }

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


_PARAMS: dict[str, tuple[int, int]] = {}


def _count_params(config: GPTConfig) -> tuple[int, int]:
    """(parameters of the blocks, all parameters) of a model, counted once per config on the
    meta device."""
    key = json.dumps(config.to_dict(), sort_keys=True, default=str)
    if key not in _PARAMS:
        with torch.device("meta"):
            model = ComplexFormerLM(config)
        _PARAMS[key] = (
            sum(p.numel() for p in model.blocks.parameters()),
            sum(p.numel() for p in model.parameters()),
        )
    return _PARAMS[key]


#: What the token rule and the rungs set, so that a ladder does not take it from its scale.
_RUNG_SHAPE = ("n_layer", "d_model", "n_head", "d_ff")
_RUNG_TRAIN = ("max_steps", "eval_every", "save_every")


def _ladder(name: str, entry: dict[str, Any], description: str) -> Ladder:
    """The :class:`Ladder` of one table of ``ladders.toml``: its scale's settings, with the
    table's keys winning."""
    fields = dict(entry)
    scale = SCALES[fields.pop("scale")]
    base = {
        "corpora": (scale.data,),
        "tokenizer": scale.tokenizer,
        "vocab_size": scale.vocab_size,
        "model": {k: v for k, v in scale.model.items() if k not in _RUNG_SHAPE},
        "train": {k: v for k, v in scale.train.items() if k not in _RUNG_TRAIN},
        "ppl_batch_size": scale.ppl_batch_size,
        "ppl_max_blocks": scale.ppl_max_blocks,
        "flush_denormal": scale.flush_denormal,
    }
    rungs = tuple(Rung(**r) for r in fields.pop("rungs"))
    return Ladder(name=name, description=description, rungs=rungs, **{**base, **fields})


def _ladders() -> dict[str, Ladder]:
    configs = lab_configs("ladders.toml", "ladder scale")
    return {n: _ladder(n, configs[n], configs.descriptions[n]) for n in configs.names()}


#: The ladders of ``reproduce --table ladder --scale``, read from
#: ``complexformer_lab/configs/ladders.toml`` (``tiny``: the CPU ladder, ``paper``: GPU rungs).
LADDERS: dict[str, Ladder] = _ladders()


def get_ladder(name: str) -> Ladder:
    """The ladder of ``reproduce --table ladder --scale NAME``.

    Raises:
        ValueError: no ladder of that name (``small`` has none).
    """
    if name not in LADDERS:
        raise unknown_key_error(name, list(LADDERS), "ladder scale")
    return LADDERS[name]


def corpus_folder(spec: str) -> str:
    """A folder name for a data spec (``hf:Salesforce/wikitext:...`` → ``hf-Salesforce-...``)."""
    return re.sub(r"[^A-Za-z0-9._-]+", "-", spec).strip("-") or "corpus"


@dataclass
class LadderConfig:
    """What ``complexformer reproduce --table ladder`` does.

    Attributes:
        out: the output directory.
        scale: the ladder's name (``tiny``: CPU, ``paper``: GPU rungs) or a :class:`Ladder`.
        seeds: seeds per (corpus, rung, variant).
        data: train on this corpus only (None: every corpus of the ladder).
        only: restrict training and evaluation to runs matching ``RUNG``, ``VARIANT``,
            ``RUNG/VARIANT`` or ``RUNG/VARIANT/seedK``; the report includes every finished run.
        threads: torch CPU threads (None: torch's default).
        device: ``auto``, ``cpu`` or ``cuda``.
        bf16: train under bfloat16 autocast.
        shard: under torchrun, shard each run over the ranks (FSDP2; ``TrainConfig.shard``).
        train_only: train, do not evaluate or report.
        command: the command line, printed in the report.
    """

    out: str
    scale: Ladder | str = "tiny"
    seeds: tuple[int, ...] = (0, 1, 2)
    data: str | None = None
    only: tuple[str, ...] = ()
    threads: int | None = None
    device: str = "auto"
    bf16: bool = False
    shard: bool = False
    train_only: bool = False
    command: str | None = None

    def __post_init__(self) -> None:
        self.out = os.fspath(self.out)
        if isinstance(self.scale, str):
            self.scale = get_ladder(self.scale)
        if isinstance(self.seeds, int):
            raise ValueError(f"seeds is a list of seeds, e.g. (0, 1, 2); got {self.seeds!r}")
        self.seeds = tuple(dict.fromkeys(int(s) for s in self.seeds))
        if not self.seeds or min(self.seeds) < 0:
            raise ValueError(f"seeds must be one or more integers >= 0, got {self.seeds!r}")
        if self.data is not None:
            parse_data_spec(self.data)  # a malformed spec fails here, before any plan or run
        self.only = tuple(self.only)
        rungs = {r.name for r in self.ladder.rungs}
        for item in self.only:
            parts = item.split("/")
            ok = (
                (len(parts) == 1 and (parts[0] in rungs or parts[0] in LADDER_VARIANTS))
                or (len(parts) >= 2 and parts[0] in rungs and parts[1] in LADDER_VARIANTS)
            ) and (len(parts) < 3 or re.fullmatch(r"seed\d+", parts[2]) is not None)
            if not ok or len(parts) > 3:
                raise ValueError(
                    f"--only {item!r}: expected RUNG, VARIANT, RUNG/VARIANT or "
                    f"RUNG/VARIANT/seedK with rungs {', '.join(sorted(rungs))} and variants "
                    f"{', '.join(LADDER_VARIANTS)}"
                )

    @property
    def ladder(self) -> Ladder:
        assert isinstance(self.scale, Ladder)
        return self.scale

    @property
    def corpora(self) -> tuple[str, ...]:
        return (self.data,) if self.data else self.ladder.corpora

    def selected(self, rung: str, variant: str, seed: int) -> bool:
        if not self.only:
            return True
        key = (rung, variant, f"seed{seed}")
        for item in self.only:
            parts = tuple(item.split("/"))
            if parts == (variant,) or key[: len(parts)] == parts:
                return True
        return False


@dataclass
class LadderRun:
    """One (corpus, rung, variant, seed) of the plan."""

    corpus: str
    rung: Rung
    run: PlannedRun
    non_embedding_params: int
    tokens: int
    compute: float

    @property
    def name(self) -> str:
        return f"{self.corpus}/{self.rung.name}/{self.run.variant}/seed{self.run.seed}"


def plan_ladder(config: LadderConfig, corpora: tuple[str, ...] | None = None) -> list[LadderRun]:
    """Every run, rung by rung (smallest first), then corpus, seed and variant, so that an
    interrupted ladder has its smaller rungs complete and balanced."""
    ladder = config.ladder
    runs = []
    for rung in ladder.rungs:
        n, d = ladder.non_embedding_params(rung), ladder.tokens(rung)
        for corpus in corpora or config.corpora:
            for seed in config.seeds:
                for v in LADDER_VARIANTS:
                    rd = Path(config.out) / corpus_folder(corpus) / rung.name / v / f"seed{seed}"
                    tc = ladder.train_config(
                        rung,
                        rd,
                        seed,
                        corpus,
                        device=config.device,
                        num_threads=config.threads,
                        bf16=config.bf16,
                    )
                    if config.shard:
                        tc = tc.replace(shard=True)
                    pr = PlannedRun(
                        v,
                        seed,
                        rd,
                        ladder.model_config(rung, v),
                        tc,
                        config.selected(rung.name, v, seed),
                    )
                    runs.append(LadderRun(corpus, rung, pr, n, d, 6.0 * n * d))
    return runs


def _fmt_s(s: float) -> str:
    return f"{s / 60:.1f} min" if s >= 90 else f"{s:.0f} s"


def run_seconds(ladder: Ladder, rung: Rung) -> float | None:
    """Estimated seconds of one CPU run (training at ``cpu_flops``, plus its evaluations),
    None for a GPU ladder."""
    if ladder.cpu_flops is None:
        return None
    cfg = ladder.model_config(rung, "cmha")
    train_s = train_flops_per_token(cfg) * ladder.tokens(rung) / ladder.cpu_flops
    # evaluations: forward only (a third of a step's FLOPs) over the val blocks during
    # training and the final val/test/extrapolation tokens.
    t = cfg.max_seq_len
    eval_tokens = (ladder.evals_per_run + 1) * 50 * t + 2 * (ladder.ppl_max_blocks or 200) * t
    eval_tokens += 3 * ladder.extrapolation_settings()["max_tokens"]
    return train_s + train_flops_per_token(cfg) / 3 * eval_tokens / ladder.cpu_flops


def format_ladder_plan(config: LadderConfig) -> str:
    """The plan of a ladder: per rung its shape, N, tokens, compute, runs, estimated time or
    GPU-hours, and which runs are done."""
    ladder = config.ladder
    runs = plan_ladder(config)
    lines = [
        f"ladder {ladder.name}: {ladder.description}",
        f"corpora: {', '.join(config.corpora)}; variants: {', '.join(LADDER_VARIANTS)}; "
        f"seeds: {' '.join(map(str, config.seeds))}; out: {config.out}",
        "token rule: steps = round("
        f"{ladder.reference_steps} * sqrt(N / N({ladder.reference}))), tokens = steps x "
        f"{ladder.train['batch_size']} x {ladder.model['max_seq_len']}; compute C = 6 N D",
        "",
    ]
    header = (
        f"{'rung':<9} {'layers':>6} {'d_model':>7} {'heads':>5} {'N (non-emb)':>12} "
        f"{'params':>11} {'steps':>7} {'tokens':>13} {'C (FLOP)':>9} {'runs':>5} "
        + ("{:>10}".format("est. each") if ladder.cpu_flops else "{:>12}".format("A100-h each"))
        + f" {'done':>6}"
    )
    lines.append(header)
    total_s, total_h = 0.0, 0.0
    ns = []
    for rung in ladder.rungs:
        mine = [r for r in runs if r.rung.name == rung.name and r.run.selected]
        done = sum(r.run.finished for r in mine)
        n = ladder.non_embedding_params(rung)
        ns.append(n)
        sec = run_seconds(ladder, rung)
        if sec is not None:
            est = f"{_fmt_s(sec):>10}"
            total_s += sec * (len(mine) - done)
        else:
            h = gpu_hours(ladder.model_config(rung, "cmha"), ladder.tokens(rung))
            total_h += h * (len(mine) - done)
            est = f"{h:>12.2f}"
        lines.append(
            f"{rung.name:<9} {rung.n_layer:>6} {rung.d_model:>7} {rung.n_head:>5} {n:>12,} "
            f"{ladder.total_params(rung):>11,} {ladder.steps(rung):>7,} "
            f"{ladder.tokens(rung):>13,} {ladder.compute(rung):>9.2e} {len(mine):>5} {est} "
            f"{done:>6}"
        )
    lines.append("")
    lines.append(
        f"span in N: {max(ns) / min(ns):.0f}x; runs: {len(runs)} "
        f"({sum(r.run.finished for r in runs)} finished)"
    )
    if ladder.cpu_flops is not None:
        lines.append(
            f"estimated time of what is left: {_fmt_s(total_s)} on 2 CPU cores "
            f"(at {ladder.cpu_flops / 1e9:.0f} GFLOP/s effective, measured on the development "
            "machine; PCL runs take longer)"
        )
    else:
        lines.append(
            f"estimated A100-hours of what is left: {total_h:,.1f} (at 40% of 312 TFLOP/s "
            "bf16; see reproduce/budget.py)"
        )
    return "\n".join(lines)


# ---------------------------------------------------------------------- evaluation
def eval_settings(ladder: Ladder) -> dict[str, Any]:
    """The evaluation settings of every run (their hash names the result file)."""
    return {
        "ppl": {
            "splits": ["val", "test"],
            "batch_size": ladder.ppl_batch_size,
            "max_blocks": ladder.ppl_max_blocks,
        },
        "extrapolation": ladder.extrapolation_settings(),
    }


def eval_path(run: LadderRun, settings: dict[str, Any]) -> Path:
    steps = run.run.summary().get("steps") if run.run.finished else None
    return run.run.run_dir / "eval" / f"ladder-{settings_key({**settings, 'steps': steps})}.json"


def evaluate_ladder_run(
    run: LadderRun, settings: dict[str, Any], context: EvalContext
) -> dict[str, Any]:
    """Evaluate a finished run (val/test perplexity, extrapolation) and save the result;
    ``context`` keeps each corpus's val/test tokens across runs."""
    t0 = time.perf_counter()
    device = context.device
    loaded = load_run(run.run.run_dir, device=device)
    model = loaded.model
    tokens = context.tokens(run.corpus, loaded.tokenizer)
    s = settings["ppl"]
    ppl = {
        split: evaluate_perplexity(
            model,
            tokens[split],
            model.config.max_seq_len - 1,
            s["batch_size"],
            max_blocks=s["max_blocks"],
            device=device,
        )
        for split in s["splits"]
    }
    ex = settings["extrapolation"]
    cfg = ExtrapolationConfig(
        **{
            **ex,
            "multipliers": tuple(ex["multipliers"]),
            "data": None,
            "device": str(device),
            "show_progress": False,
        }
    )
    payload = run_extrapolation_suite([loaded], cfg, None, names=[run.name])
    extra = {str(r["multiplier"]): r["ppl"] for r in payload["runs"][0]["results"]}
    summary = run.run.summary()
    result = {
        "corpus": run.corpus,
        "rung": run.rung.name,
        "variant": run.run.variant,
        "seed": run.run.seed,
        "run_dir": str(run.run.run_dir),
        "non_embedding_params": run.non_embedding_params,
        "params": sum(p.numel() for p in model.parameters()),
        "steps": summary.get("steps"),
        "tokens": run.tokens,
        "compute": run.compute,
        "train_time_s": summary.get("elapsed_s"),
        "val_loss": ppl["val"]["loss"],
        "val_ppl": ppl["val"]["ppl"],
        "test_loss": ppl["test"]["loss"],
        "test_ppl": ppl["test"]["ppl"],
        "extrapolation": extra,
        "eval_time_s": time.perf_counter() - t0,
        "settings": settings,
    }
    write_json(eval_path(run, settings), result)
    return result


def cached_ladder_result(run: LadderRun, settings: dict[str, Any]) -> dict[str, Any] | None:
    if not run.run.finished:
        return None
    path = eval_path(run, settings)
    return json.loads(path.read_text(encoding="utf-8")) if path.is_file() else None


# ---------------------------------------------------------------------- the whole ladder
def run_ladder(config: LadderConfig, *, log: Callable[[str], Any] | None = print) -> dict:
    """Train and evaluate every selected run (resumable), then write the report of every
    finished run of every corpus of the ladder (:mod:`.ladder_report`).

    Returns:
        ``{"results": [...], "report": {files}, "trained", "skipped", "elapsed_s"}``.
    """
    say = log or (lambda _m: None)
    rank, world, local = env_world()
    if rank != 0:
        say = lambda _m: None  # noqa: E731
    ladder = config.ladder
    train_only = config.train_only or world > 1
    runs = plan_ladder(config)
    for r in runs:
        check_run_settings(r.run)
    device = resolve_device(config.device, local)
    settings = eval_settings(ladder)
    t_start = time.perf_counter()
    trained = skipped = 0
    todo = [r for r in runs if r.run.selected]
    locks = contextlib.ExitStack()
    with locks, cpu_settings(config.threads, ladder.flush_denormal and device.type == "cpu"):
        if rank == 0:
            for corpus in config.corpora:
                locks.enter_context(run_lock(Path(config.out) / corpus_folder(corpus), "ladder"))
        context = EvalContext(None, device, log=say)
        for i, r in enumerate(todo, 1):
            head = f"[{i}/{len(todo)}] {r.name}"
            if not r.run.finished:
                step = r.run.checkpoint_step()
                say(
                    f"{head}: training {r.run.train_config.max_steps} steps"
                    + (f" (resuming from step {step})" if step is not None else "")
                )
                t0 = time.perf_counter()
                train(r.run.model_config, r.run.train_config, resume=True, log=None)
                trained += 1
                say(
                    f"{head}: trained in {_fmt_s(time.perf_counter() - t0)} "
                    f"(total {_fmt_s(time.perf_counter() - t_start)})"
                )
            else:
                skipped += 1
            if train_only or cached_ladder_result(r, settings) is not None:
                continue
            res = evaluate_ladder_run(r, settings, context)
            say(
                f"{head}: val ppl {res['val_ppl']:.2f}, test ppl {res['test_ppl']:.2f}, "
                f"x2 {res['extrapolation'].get('2')}, evaluated in {res['eval_time_s']:.0f} s"
            )
    if train_only:
        return {
            "results": [],
            "report": {},
            "trained": trained,
            "skipped": skipped,
            "elapsed_s": time.perf_counter() - t_start,
        }
    # the report: every corpus of the ladder and the one given with --data
    corpora = tuple(dict.fromkeys((*ladder.corpora, *config.corpora)))
    everything = plan_ladder(config, corpora=corpora)
    results = [c for r in everything if (c := cached_ladder_result(r, settings)) is not None]
    report = write_ladder_report(config, results, LADDER_VARIANTS, ladder.target_compute(), log=say)
    elapsed = time.perf_counter() - t_start
    with open_file(Path(config.out) / "invocations.jsonl", "a") as f:  # no link
        f.write(
            json.dumps(
                {
                    "command": config.command,
                    "ladder": ladder.name,
                    "corpora": list(config.corpora),
                    "seeds": list(config.seeds),
                    "trained": trained,
                    "skipped": skipped,
                    "elapsed_s": round(elapsed, 1),
                    "finished_at": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
                }
            )
            + "\n"
        )
    say(
        f"ladder: done in {_fmt_s(elapsed)} ({trained} trained, {skipped} already finished); "
        f"report in {report.get('markdown')}"
    )
    return {
        "results": results,
        "report": report,
        "trained": trained,
        "skipped": skipped,
        "elapsed_s": elapsed,
    }
