"""Loads as a plugin so installation and ``proton plugins`` work; adds no hooks yet."""
