"""Harmonious watercolour palettes per flower, and lighter/darker washes of them for variations.

A palette names colours by the role they play in a painting, light to dark: ``wash`` (the pale first
wash of the petals), ``body`` (the second, stronger wash), ``deep`` (the eye, blotch or shadow),
``centre`` and ``pollen`` (stamens, disc, beard), ``leaf`` and ``leaf_dark`` (two greens), ``wood``
(stems or twigs). White flowers are painted with cool grey-lilac shadow washes so they read on the
cream paper. All colours were picked by eye for this corpus.
"""

from __future__ import annotations

import colorsys
import random
from dataclasses import dataclass, replace


@dataclass(frozen=True)
class Palette:
    """Hex colour strings (``"#rrggbb"``) by role; ``name`` is the colour word used in subjects."""

    name: str
    wash: str
    body: str
    deep: str
    centre: str
    pollen: str
    leaf: str = "#6f9e52"
    leaf_dark: str = "#3f6e3a"
    wood: str = "#5b7f3f"


def _p(name: str, wash: str, body: str, deep: str, centre: str, pollen: str, **greens: str) -> Palette:
    return Palette(name, wash, body, deep, centre, pollen, **greens)


#: Palettes by flower family; the first of each list is the canonical one.
PALETTES: dict[str, list[Palette]] = {
    "peach_hibiscus": [
        _p("peach", "#f8c4a4", "#f2a07b", "#d9534f", "#f6dc8c", "#e9a23b"),
        _p("peach", "#fbcfb2", "#f4a985", "#cf4b4b", "#f8e3a0", "#e59b2f"),
        _p("peach", "#f9bf9f", "#ee9670", "#c8424e", "#f3d77e", "#dd8f2a", leaf="#7aa65a", leaf_dark="#47753d"),
    ],
    "magenta_hibiscus": [
        _p("magenta", "#f0a3cf", "#d94f9e", "#8e1f5e", "#f5e4a1", "#f0c04a"),
        _p("magenta", "#f2b0d6", "#cf3f93", "#7d1a55", "#f7ebb2", "#eab23c", leaf="#5f9a57"),
    ],
    "yellow_hibiscus": [
        _p("yellow", "#fbe27a", "#f5c542", "#c9472f", "#fff1b8", "#e2a21a"),
        _p("yellow", "#fce88f", "#f4bd34", "#b83a33", "#fff4c4", "#d9951a", leaf="#5e9448"),
    ],
    "coral_hibiscus": [
        _p("coral", "#f9a98e", "#ef6f57", "#b8283a", "#fde3a0", "#f2b33d"),
        _p("coral", "#fab39a", "#ea6650", "#a92335", "#fbe6ad", "#eeaa35", leaf="#659c50"),
    ],
    "white_hibiscus": [
        _p("white", "#e6dfe4", "#d2c8d9", "#c0283c", "#f7e6a8", "#e3aa36"),
        _p("white", "#e8e0dc", "#cfc8dc", "#b52238", "#f6e09a", "#dca032"),
    ],
    "poppy": [
        _p("coral", "#f7a384", "#f0704f", "#3a2b2e", "#4a5a3c", "#262430"),
        _p("coral", "#f9ad8f", "#ec6a4c", "#33272b", "#52603f", "#22202c"),
        _p("coral", "#f59c82", "#e8654e", "#3d2c30", "#475639", "#2a2430", leaf="#7ea35c"),
    ],
    "red_poppy": [
        _p("red", "#f28b7a", "#d9352a", "#2b2326", "#3f4d36", "#201c24"),
        _p("red", "#f4968a", "#d02f2f", "#2a2024", "#46543a", "#1d1a22"),
    ],
    "orange_poppy": [
        _p("orange", "#fbb573", "#f28a2e", "#c2561a", "#f4d27a", "#d98a1a"),
        _p("orange", "#fcbf80", "#f0822a", "#bb4f18", "#f6da8c", "#d48016"),
    ],
    "white_anemone": [
        _p("white", "#e2e0ed", "#c9cae2", "#b4b6d6", "#2f3557", "#1f2238"),
        _p("white", "#e6e2ea", "#cdc8df", "#b8b2d3", "#2c2f4e", "#1b1d33"),
    ],
    "anemone": [
        _p("purple", "#c9a8e0", "#8d5bb8", "#5b3588", "#2d2546", "#1d1830"),
        _p("red", "#f39a9a", "#d6384a", "#9e1f35", "#2a2238", "#1b1628"),
        _p("pink", "#f6b8cf", "#e2759e", "#b8456f", "#2d2540", "#1d1830"),
    ],
    "violet_iris": [
        _p("violet", "#c4b1e8", "#7d5bc4", "#4b2d8f", "#f3c94a", "#f7ecc4", leaf="#6d9a62", leaf_dark="#416f48"),
        _p("violet", "#cbb8ec", "#7552c0", "#432786", "#f1c23c", "#f9f0cf", leaf="#6a9860", leaf_dark="#3e6b45"),
    ],
    "blue_iris": [
        _p("blue", "#a9c1ef", "#4f74c9", "#2c3f8f", "#f3c94a", "#f7ecc4", leaf="#6d9a62", leaf_dark="#416f48"),
    ],
    "tulip": [
        _p("red", "#f59a8c", "#e0473b", "#a82630", "#f3c94a", "#2b2326"),
        _p("yellow", "#fbe08a", "#f3bd3a", "#d98a1c", "#f6d35b", "#8a5a1c"),
        _p("pink", "#f7b8cb", "#ea7fa3", "#c2476f", "#f3c94a", "#5a3a4a"),
        _p("purple", "#c6a7dd", "#8a5cb3", "#5a2f86", "#f3c94a", "#3a2a4a"),
    ],
    "blossom": [
        _p("pink", "#fad4df", "#f3a8bf", "#d8678e", "#c0395f", "#f6d26b", wood="#6b4a3a"),
        _p("pink", "#fbdce4", "#f0a2b9", "#cf5d85", "#b8345a", "#f3cb5e", wood="#5e4236"),
        _p("white", "#ebe1e5", "#dfc6d2", "#d29bb0", "#b8345a", "#f0c85a", wood="#6b4a3a"),
    ],
    "daisy": [
        _p("white", "#e7e5ef", "#cfcee3", "#bdbcd8", "#f2c12e", "#d48a16"),
        _p("white", "#eae6ea", "#d3cde0", "#c1bad6", "#f4c834", "#cf8414", leaf="#79a65a"),
    ],
    "rose": [
        _p("red", "#f4a0a0", "#d94a57", "#9e1f35", "#7a1a2c", "#f0c04a"),
        _p("pink", "#f8c0c8", "#ee8ea0", "#c9506b", "#a83a55", "#f0c04a"),
        _p("yellow", "#fde6a2", "#f6c55a", "#dc9533", "#c07a22", "#f0c04a"),
        _p("apricot", "#fbd0ae", "#f4a777", "#d9764a", "#b85d38", "#f0c04a"),
    ],
    "lotus": [
        _p("pink", "#f9c6d6", "#ee8fb0", "#c9517f", "#e6d36b", "#c9b440", leaf="#5f9c78", leaf_dark="#3f7a5c"),
        _p("pink", "#fad0dc", "#eb86a8", "#c04876", "#e2d066", "#c0ab3a", leaf="#5a9672", leaf_dark="#3a7356"),
    ],
    "water_lily": [
        _p("white", "#e3dfed", "#cfc8e2", "#e2aec6", "#f3cf4a", "#e0a72a", leaf="#5f9c78", leaf_dark="#3f7a5c"),
        _p("pink", "#f7d0de", "#eea3c0", "#d7739c", "#f3cf4a", "#e0a72a", leaf="#5f9c78", leaf_dark="#3f7a5c"),
    ],
    "sunflower": [
        _p("yellow", "#fbd54a", "#f2b21f", "#d98a14", "#6b4226", "#3e2718"),
        _p("yellow", "#fcdc5c", "#f0aa1c", "#d07f12", "#73482a", "#3a2416", leaf="#6a9a48"),
    ],
    "lavender": [
        _p("lavender", "#c9b6e8", "#9a7fd1", "#6a4fa8", "#6a4fa8", "#4a3580", leaf="#8aa66a", leaf_dark="#60804a", wood="#7f9c62"),
        _p("lavender", "#cdbbec", "#9478cf", "#6246a2", "#6246a2", "#452f7a", leaf="#8fa870", leaf_dark="#5d7c48", wood="#7a985e"),
    ],
    "cosmos": [
        _p("pink", "#f6b4d0", "#e2779f", "#b9456f", "#f3c63e", "#c98a1a", leaf="#7aa85a"),
        _p("magenta", "#eea0c8", "#d24f92", "#9e2a66", "#f3c63e", "#c98a1a", leaf="#7aa85a"),
        _p("white", "#e7e0e8", "#d6c6d9", "#cfa9c6", "#f3c63e", "#c98a1a", leaf="#7aa85a"),
    ],
    "magnolia": [
        _p("pink", "#f2c6d6", "#e39abb", "#b45f86", "#8a3a60", "#f0d08a", wood="#5a4a3e"),
        _p("white", "#e4d6da", "#d3bccb", "#c493ab", "#8a3a60", "#f0d08a", wood="#5a4a3e"),
    ],
    "camellia": [
        _p("red", "#f49aa0", "#d8404f", "#a12037", "#f6d35b", "#e0a22a", leaf="#4f8a48", leaf_dark="#2f5f34"),
        _p("pink", "#f7bcc6", "#ea8296", "#c24a66", "#f6d35b", "#e0a22a", leaf="#4f8a48", leaf_dark="#2f5f34"),
    ],
    "peony": [
        _p("pink", "#f9c9d4", "#f09ab2", "#d3648a", "#f4d27a", "#e0a83a"),
        _p("coral", "#f9c0aa", "#f08e76", "#d25a4e", "#f4d27a", "#e0a83a"),
        _p("white", "#ebe2e2", "#dcc8d0", "#cc9fb0", "#f4d27a", "#e0a83a"),
    ],
    "morning_glory": [
        _p("blue", "#b9c9f4", "#6a86de", "#3b4fb0", "#f4f1e6", "#f2d35a"),
        _p("purple", "#cdb4ee", "#8f62d2", "#5d2fa4", "#f4f1e6", "#f2d35a"),
    ],
    "pansy": [
        _p("purple", "#c7a6e6", "#7c4fb8", "#3a1f5c", "#f5d33a", "#f7e7a0"),
        _p("yellow", "#fbe58a", "#f1c232", "#5a2f6a", "#f59a2a", "#fbefb8"),
        _p("blue", "#b3c2ef", "#5a6fcc", "#26305e", "#f5d33a", "#f7e7a0"),
    ],
    "bluebell": [
        _p("blue", "#b5c0f0", "#7584d6", "#4a55a8", "#e8e4f6", "#d8d4ef", leaf="#6f9e62", leaf_dark="#467548"),
    ],
    "calla": [
        _p("white", "#e6e3dc", "#d2d6c9", "#bcc7a9", "#f2c53d", "#e0a52a", leaf="#5e9a5a", leaf_dark="#3a6e40"),
        _p("yellow", "#fbe48e", "#f2c443", "#d99a22", "#f2a53d", "#d0801a", leaf="#5e9a5a", leaf_dark="#3a6e40"),
    ],
    "dahlia": [
        _p("coral", "#f7a48c", "#ec6f5a", "#c0413f", "#f2c44a", "#a82a32"),
        _p("magenta", "#eea0c8", "#d24f92", "#9e2a66", "#f2c44a", "#7a1f4e"),
        _p("orange", "#fbbd7a", "#f2923a", "#cf5f1f", "#f2c44a", "#a8401a"),
    ],
    "orchid": [
        _p("white", "#e9dbe4", "#dac2d5", "#b3478d", "#f2d35a", "#c23a72", leaf="#5f9450", leaf_dark="#3c6a3a", wood="#7a8a4a"),
        _p("pink", "#f6d0e6", "#e7a3cf", "#b3478d", "#f2d35a", "#8e2a66", leaf="#5f9450", leaf_dark="#3c6a3a", wood="#7a8a4a"),
    ],
    "clematis": [
        _p("purple", "#c7b4ec", "#8e72d4", "#5a44a0", "#f1e7b0", "#d9c060"),
        _p("blue", "#b9c4ef", "#7387d8", "#4456aa", "#f1e7b0", "#d9c060"),
    ],
    "forget_me_not": [
        _p("blue", "#b8d4f4", "#6f9fe0", "#3f6fc0", "#f7dc5a", "#ffffff", leaf="#78a860", leaf_dark="#4f7e44"),
    ],
    "buttercup": [
        _p("yellow", "#fbe77a", "#f5cf2a", "#d9a514", "#b8c24a", "#8a9a2a"),
    ],
    "plumeria": [
        _p("white", "#ede3cc", "#f3d98a", "#f0b73a", "#f7dc7a", "#e9b43a", leaf="#4f8a48", leaf_dark="#2f6a36"),
        _p("pink", "#f9cfd9", "#ef98b0", "#f2c04a", "#f7dc7a", "#d35a7e", leaf="#4f8a48", leaf_dark="#2f6a36"),
    ],
    "lily": [
        _p("orange", "#fbb27a", "#f07f3a", "#c6491e", "#6b2a1e", "#7a3a1a"),
        _p("pink", "#f7bfd2", "#e97aa2", "#c23f6f", "#7a1f40", "#a0402a"),
        _p("white", "#e8e1e6", "#d5c8dc", "#cfaec6", "#b83a5a", "#a0602a"),
    ],
    "hellebore": [
        _p("plum", "#e7c9d8", "#b7799a", "#7a3f62", "#e6e19a", "#c8c060", leaf="#4f7f4a", leaf_dark="#2f5a36"),
        _p("white", "#e6e2d4", "#d3d5bb", "#b3c08a", "#e6e19a", "#c8c060", leaf="#4f7f4a", leaf_dark="#2f5a36"),
    ],
    "zinnia": [
        _p("red", "#f59a8c", "#e0473b", "#a82630", "#f2c44a", "#5a2a1a"),
        _p("orange", "#fbbd7a", "#f2923a", "#cf5f1f", "#f2c44a", "#5a2a1a"),
        _p("pink", "#f7b8cb", "#ea7fa3", "#c2476f", "#f2c44a", "#5a2a1a"),
    ],
    "marigold": [
        _p("orange", "#fcc46a", "#f5a020", "#d66a10", "#b8460e", "#7a2a0a"),
        _p("yellow", "#fde07a", "#f7c22a", "#e09a14", "#c0780e", "#7a4a0a"),
    ],
    "crocus": [
        _p("purple", "#d2bdf0", "#9d7bdc", "#6a47b0", "#f5b42a", "#f7d35a", leaf="#6f9e52", leaf_dark="#47753d"),
        _p("yellow", "#fce48a", "#f5c93a", "#d99a1a", "#f0a02a", "#f7d35a"),
        _p("white", "#e4e0ee", "#d0c8e4", "#b9a8da", "#f5b42a", "#f7d35a"),
    ],
    "hydrangea": [
        _p("blue", "#bccdf2", "#8aa4e6", "#5a72c8", "#d6c8f0", "#ffffff", leaf="#5f9450", leaf_dark="#3c6a3a"),
        _p("pink", "#f5c6dc", "#e79ac0", "#c9669a", "#f3d6e6", "#ffffff", leaf="#5f9450", leaf_dark="#3c6a3a"),
        _p("violet", "#d3c2ef", "#a98ddf", "#7b5ec2", "#e6dcf6", "#ffffff", leaf="#5f9450", leaf_dark="#3c6a3a"),
    ],
    "geranium": [
        _p("red", "#f5a29a", "#e2524a", "#b42a30", "#f3c94a", "#ffffff", leaf="#5f9450", leaf_dark="#3c6a3a"),
        _p("pink", "#f7bccd", "#ec86a6", "#c9527c", "#f3c94a", "#ffffff", leaf="#5f9450", leaf_dark="#3c6a3a"),
    ],
    "lilac": [
        _p("lilac", "#dcc8ef", "#b79ae0", "#8a66c4", "#f2ecf8", "#ffffff", leaf="#6f9e52", leaf_dark="#47753d", wood="#6a7a4a"),
    ],
    "foxglove": [
        _p("pink", "#f2c0dc", "#d97fb4", "#9e3a78", "#7a2a5a", "#f6eef2", leaf="#6f9e52", leaf_dark="#47753d"),
        _p("white", "#e6dde6", "#d4c3da", "#b98aac", "#7a2a5a", "#f6eef2", leaf="#6f9e52", leaf_dark="#47753d"),
    ],
    "grape_hyacinth": [
        _p("blue", "#aab8ee", "#5f6fd0", "#39409c", "#dde2fa", "#ffffff", leaf="#6f9e52", leaf_dark="#47753d"),
    ],
}

#: Pale cream/off-white grounds (the first is the skeleton's default).
BACKGROUNDS: tuple[str, ...] = ("#fdf8ee", "#fbf6ea", "#fcf7f1", "#faf4e8")


#: Lightness shifts (HLS, 0..1) a variation may apply to a whole palette: a paler wash, the palette
#: as picked, a stronger wash. A small fixed set keeps the corpus to ~1,400 distinct colours (each
#: one token of the tiny policy's tokenizer, see ``brushrl.policy.tokenizer``); continuous per-colour
#: jitter gave 3,508 distinct colours in 8,808 uses (12 variations), most of them seen once.
LIGHTNESS_SHIFTS: tuple[float, ...] = (-0.05, 0.0, 0.05)


def shift_lightness(hex_colour: str, shift: float) -> str:
    """``hex_colour`` with its HLS lightness moved by ``shift`` (clamped to 0..1).

    Args:
        hex_colour: ``"#rrggbb"``.
        shift: lightness change, -1..1.

    Returns:
        A ``"#rrggbb"`` string (lower case).
    """
    r, g, b = (int(hex_colour[i : i + 2], 16) / 255 for i in (1, 3, 5))
    h, l, s = colorsys.rgb_to_hls(r, g, b)
    r, g, b = colorsys.hls_to_rgb(h, min(max(l + shift, 0.0), 1.0), s)
    return "#" + "".join(f"{round(c * 255):02x}" for c in (r, g, b))


def vary_palette(palette: Palette, rng: random.Random) -> Palette:
    """A copy of ``palette`` with every colour moved by one lightness shift drawn from
    ``LIGHTNESS_SHIFTS`` (``name`` unchanged)."""
    shift = rng.choice(LIGHTNESS_SHIFTS)
    roles = ("wash", "body", "deep", "centre", "pollen", "leaf", "leaf_dark", "wood")
    return replace(palette, **{role: shift_lightness(getattr(palette, role), shift) for role in roles})
