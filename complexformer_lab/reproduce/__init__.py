"""Reproduce the ComplexFormer paper's comparisons (Shao et al., "ComplexFormer: Disruptively
Advancing Transformer Inference Ability via Head-Specific Complex Vector Attention", 2025):
Table 1 (positional schemes), Tables 2 and 3 (code and math after fine-tuning), Table 4
(ablation) and a length-extrapolation table, at a chosen scale, with several seeds, resumably.

Modules: :mod:`.variants` (tables -> variants -> :class:`~complexformer.models.GPTConfig`;
the ``tiny``, ``small`` and ``paper`` scales), :mod:`.budget` (a budget in epochs: token
count, steps, GPU-hours), :mod:`.finetune` (the fine-tuning recipes of Tables 2-4),
:mod:`.plan` (every pre-training and fine-tuning run), :mod:`.evaluate` and :mod:`.tasks`
(cached evaluation of the runs), :mod:`.runner` (train + evaluate every run, then
tabulate), :mod:`.table` and :mod:`.table_tasks` (pure table builders: mean ± std, paired
t-tests against RoPE), :mod:`.plots` (loss curves averaged over seeds), :mod:`.cli`
(``complexformer reproduce``). See docs/reproduce.md.

Typical use::

    from complexformer_lab.reproduce import ReproduceConfig, reproduce

    config = ReproduceConfig(out="runs/repro", tables=("1", "4"), scale="tiny", seeds=(0, 1, 2))
    out = reproduce(config)
    print(out["tables"]["1"]["payload"]["markdown"])
"""

from .finetune import FineTuneSpec
from .plan import plan_finetunes
from .runner import (
    PlannedRun,
    ReproduceConfig,
    format_plan,
    plan_runs,
    reproduce,
    resolve_budget,
)
from .table import (
    build_extrapolation_table,
    build_table1,
    build_table4,
    mean_std,
    paired_comparison,
    paired_t_test,
    student_t_two_sided_p,
)
from .table_tasks import build_table2, build_table3
from .variants import SCALES, TABLES, VARIANTS, Scale, Variant, get_scale, run_dir

__all__ = [
    "SCALES",
    "TABLES",
    "VARIANTS",
    "FineTuneSpec",
    "PlannedRun",
    "ReproduceConfig",
    "Scale",
    "Variant",
    "build_extrapolation_table",
    "build_table1",
    "build_table2",
    "build_table3",
    "build_table4",
    "format_plan",
    "get_scale",
    "mean_std",
    "paired_comparison",
    "paired_t_test",
    "plan_finetunes",
    "plan_runs",
    "reproduce",
    "resolve_budget",
    "run_dir",
    "student_t_two_sided_p",
]
