"""Ranking items with pairwise preferences: PAIRS merge sort and binary-search insertion."""
