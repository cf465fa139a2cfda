"""What a run is asked to do: the options model, RunConfig, `module:attr` references."""
