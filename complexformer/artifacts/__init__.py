"""One loader for every artifact the package writes: :func:`load_artifact` recognises a
language-model run, checkpoint or final model, a transformers export, a retrofit run or
adaptation and a CmplxBERT directory by their markers, and returns an :class:`Artifact`
that generates, scores, describes and exports itself, or refuses by name."""

from .artifact import Artifact, complete_text
from .kinds import KINDS, detect_kind
from .loader import load_artifact

__all__ = ["KINDS", "Artifact", "complete_text", "detect_kind", "load_artifact"]
