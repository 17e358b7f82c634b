"""Colours for the plots' series: Okabe and Ito's palette, told apart with the common
colour-blindnesses, brightest first for a dark background; each series also has its own
marker character, so none depends on hue alone."""

from __future__ import annotations

SKY_BLUE, ORANGE, BLUISH_GREEN, YELLOW = "#56B4E9", "#E69F00", "#009E73", "#F0E442"
BLUE, VERMILLION, REDDISH_PURPLE, GREY = "#0072B2", "#D55E00", "#CC79A7", "#BBBBBB"
SERIES = (SKY_BLUE, ORANGE, BLUISH_GREEN, YELLOW, REDDISH_PURPLE, VERMILLION, BLUE, GREY)
MARKERS = ("●", "■", "▲", "◆", "▼", "✚", "✖", "○")
