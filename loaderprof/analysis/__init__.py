"""Pure analysis: statistics, summaries, the verdict, gates, projections, capacity."""
