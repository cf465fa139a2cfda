"""What runs inside the measured processes: the trial child, its DataLoader workers,
and the user's own process under `watch` (the hook). Light imports only: nothing here
may slow or perturb what it measures."""
