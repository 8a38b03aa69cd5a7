"""complextorch 2.1.1's ``models.ViT`` (and its size presets) on complexformer.models.ViT."""

from .vit import ViT, ViTLayer, vit_b, vit_h, vit_l, vit_s, vit_t

__all__ = ["ViT", "ViTLayer", "vit_b", "vit_h", "vit_l", "vit_s", "vit_t"]
