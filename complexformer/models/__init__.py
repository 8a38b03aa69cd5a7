"""Models: the ComplexFormer language model and its configuration."""

from .config import PRESETS, GPTConfig, preset_config
from .lm import ComplexFormerLM, LMOutput
from .report import format_parameter_report, parameter_report
from .vit import ViT

__all__ = [
    "PRESETS",
    "ComplexFormerLM",
    "GPTConfig",
    "LMOutput",
    "ViT",
    "format_parameter_report",
    "parameter_report",
    "preset_config",
]
