"""The compare pipeline: schedule trials, run them, analyse them into a Report
(sweeps and torchrun ranks too). Named for the verb so `loaderprof.compare`, the
public function, is never shadowed by a subpackage."""
