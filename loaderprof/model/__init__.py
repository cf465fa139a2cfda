"""Typed, frozen results and their JSON form: imports nothing else of loaderprof's."""
