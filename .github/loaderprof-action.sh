#!/usr/bin/env bash
# Every shell step of the loaderprof GitHub Action (action.yml), in one place so
# that the tests can run it without GitHub (tests/test_action.py).
#
#   loaderprof-action.sh install   pip-install torch, loaderprof and the user's packages
#   loaderprof-action.sh run       run `loaderprof compare`, fill the job summary and
#                                  the step outputs; exits with compare's exit code
#
# Inputs come from environment variables that action.yml sets (INPUT_*), plus the
# runner's own GITHUB_EVENT_NAME, GITHUB_REF, GITHUB_STEP_SUMMARY and GITHUB_OUTPUT.
# LOADERPROF_PYTHON (default: python) is the interpreter to install into and run;
# LOADERPROF_BIN, when set, replaces `$LOADERPROF_PYTHON -m loaderprof` (tests).
# Only bash and python are needed; `run` needs no network.
set -euo pipefail

PY="${LOADERPROF_PYTHON:-python}"

say() { printf 'loaderprof-action: %s\n' "$*" >&2; }
die() {
	say "error: $*"
	exit 2
}

# split_words TEXT: WORDS=(TEXT split as a shell would, without running a shell:
# quotes group, nothing expands). With a second argument "comments", a word
# starting with # comments out the rest of its line.
WORDS=()
split_words() {
	local tmp
	tmp="$(mktemp)"
	if ! "$PY" -c '
import shlex, sys
words = shlex.split(sys.argv[1], comments=sys.argv[2] == "comments")
sys.stdout.write("".join(w + "\0" for w in words))
' "$1" "${2:-}" >"$tmp"; then
		rm -f "$tmp"
		die "cannot split into words (unbalanced quotes?): $1"
	fi
	WORDS=()
	local word
	while IFS= read -r -d '' word; do
		WORDS+=("$word")
	done <"$tmp"
	rm -f "$tmp"
}

# set_output NAME VALUE: a step output (GITHUB_OUTPUT), when there is one. The
# delimiter form, so a value holding a newline (a path from an input) cannot end it.
set_output() {
	if [[ -n "${GITHUB_OUTPUT:-}" ]]; then
		local eof="LOADERPROF_EOF_$RANDOM$RANDOM"
		printf '%s<<%s\n%s\n%s\n' "$1" "$eof" "$2" "$eof" >>"$GITHUB_OUTPUT"
	fi
}

cmd_install() {
	local pip=("$PY" -m pip install --disable-pip-version-check)
	if [[ -n "${INPUT_EXTRA_INDEX_URL:-}" ]]; then
		pip+=(--extra-index-url "$INPUT_EXTRA_INDEX_URL")
	fi
	# torch first, so that loaderprof's `torch>=2.1` is already met by the build asked
	# for (a CPU wheel) and pip does not pull a multi-GB CUDA build.
	split_words "${INPUT_TORCH_SPEC-torch}"
	if ((${#WORDS[@]})); then
		"${pip[@]}" "${WORDS[@]}"
	fi
	[[ -n "${INPUT_LOADERPROF:-}" ]] || die "INPUT_LOADERPROF (what to pip-install as loaderprof) is empty"
	"${pip[@]}" "$INPUT_LOADERPROF"
	split_words "${INPUT_INSTALL:-}"
	if ((${#WORDS[@]})); then
		"${pip[@]}" "${WORDS[@]}"
	fi
}

# add_gates TEXT: the gates input as compare options. When its first word starts
# with "-" it is passed as it is (--fail-on X --gates F --strict ...); otherwise
# each word is a gate file (an existing path: --gates) or METRIC:LIMIT (--fail-on).
add_gates() {
	split_words "$1" comments
	((${#WORDS[@]})) || return 0
	if [[ "${WORDS[0]}" == -* ]]; then
		CMD+=("${WORDS[@]}")
		return 0
	fi
	local word
	for word in "${WORDS[@]}"; do
		if [[ -f "$word" ]]; then
			CMD+=(--gates "$word")
		else
			CMD+=(--fail-on "$word")
		fi
	done
}

# The default-branch push that keeps its report as the baseline (save-baseline: auto).
is_default_branch_push() {
	[[ "${GITHUB_EVENT_NAME:-}" == push && -n "${INPUT_DEFAULT_BRANCH:-}" &&
		"${GITHUB_REF:-}" == "refs/heads/${INPUT_DEFAULT_BRANCH}" ]]
}

cmd_run() {
	[[ -n "${INPUT_DATASET:-}" ]] || die "the dataset input is required (pkg.module:attr or path/file.py:attr)"
	local out="${INPUT_OUTPUT_DIR:-loaderprof-report}"
	local baseline="${INPUT_BASELINE_PATH:-.loaderprof/baseline.json}"
	local json="$out/loaderprof.json" md="$out/loaderprof.md" junit="$out/loaderprof.xml"
	local html="" save=false use_baseline=false

	case "${INPUT_SAVE_BASELINE:-auto}" in
	auto) if is_default_branch_push; then save=true; fi ;;
	true) save=true ;;
	false) ;;
	*) die "save-baseline must be auto, true or false, not '${INPUT_SAVE_BASELINE}'" ;;
	esac
	if [[ -s "$baseline" ]]; then
		use_baseline=true
	fi

	local lp=("$PY" -m loaderprof)
	if [[ -n "${LOADERPROF_BIN:-}" ]]; then
		lp=("$LOADERPROF_BIN")
	fi

	mkdir -p "$out"
	CMD=("${lp[@]}" compare "$INPUT_DATASET")
	split_words "${INPUT_ARGS:-}"
	if ((${#WORDS[@]})); then
		CMD+=("${WORDS[@]}")
	fi
	add_gates "${INPUT_GATES:-}"
	if $use_baseline; then
		CMD+=(--baseline "$baseline")
		add_gates "${INPUT_BASELINE_GATES:-}"
	fi
	CMD+=(--json "$json" --junit "$junit" --markdown "$md")
	# An HTML exporter is newer than some loaderprof versions: ask this one.
	local help
	help="$(COLUMNS=200 "${lp[@]}" compare --help 2>/dev/null || true)"
	if grep -Eq -- '(^|[^[:alnum:]-])--html([^[:alnum:]-]|$)' <<<"$help"; then
		html="$out/loaderprof.html"
		CMD+=(--html "$html")
	fi
	local new_baseline=""
	if $save; then
		mkdir -p "$(dirname "$baseline")"
		# Written beside it and moved over it only after a complete run, so that a
		# failed run never replaces a good baseline (nor the one it compares against).
		new_baseline="$(dirname "$baseline")/.loaderprof-baseline-new.json"
		rm -f "$new_baseline"
		CMD+=(--save-baseline "$new_baseline")
	fi
	rm -f "$json" "$md" "$junit" ${html:+"$html"}

	say "running: $(printf '%q ' "${CMD[@]}")"
	local rc=0
	# loaderprof appends its Markdown to GITHUB_STEP_SUMMARY by itself; this script
	# does it instead (below), also when the run fails before writing any.
	env -u GITHUB_STEP_SUMMARY "${CMD[@]}" || rc=$?

	local saved=false
	if $save; then
		if ((rc <= 1)) && [[ -s "$new_baseline" ]]; then
			mv -f "$new_baseline" "$baseline"
			saved=true
			say "saved the baseline: $baseline"
		else
			rm -f "$new_baseline"
			say "not saving a baseline: compare exited with $rc"
		fi
	fi

	if [[ -n "${GITHUB_STEP_SUMMARY:-}" ]]; then
		if [[ -s "$md" ]]; then
			{
				cat "$md"
				printf '\n'
			} >>"$GITHUB_STEP_SUMMARY"
		else
			# shellcheck disable=SC2016 # Markdown's backticks, not a command substitution
			printf '### loaderprof: `%s`\n\n**compare exited with %s before writing its report**; see the job log.\n\n' \
				"$INPUT_DATASET" "$rc" >>"$GITHUB_STEP_SUMMARY"
		fi
	fi

	local gate_status=none
	if [[ -s "$json" ]]; then
		gate_status="$("$PY" -c '
import json, sys
try:
    print(json.load(open(sys.argv[1], encoding="utf-8")).get("gate_status") or "none")
except Exception:
    print("unknown")
' "$json")"
	fi
	set_output exit-code "$rc"
	set_output gate-status "$gate_status"
	set_output report-dir "$out"
	set_output json "$json"
	set_output markdown "$md"
	set_output junit "$junit"
	set_output html "$html"
	set_output baseline-used "$use_baseline"
	set_output baseline-saved "$saved"
	set_output baseline-path "$baseline"
	return "$rc"
}

case "${1:-}" in
install) cmd_install ;;
run) cmd_run ;;
*)
	say "usage: $0 install|run"
	exit 2
	;;
esac
