#!/usr/bin/env bash
# cli/evald-cli.bash-completion, run: what it offers after a few command lines (CTest
# cli/completion). --json takes a PATH after `experiment run|watch` and is a flag elsewhere.
# No set -e or -u: the completion runs in an interactive shell, where neither is set.
shopt -s extglob
here=$(mktemp -d)
trap 'rm -rf "$here"' EXIT
touch "$here/exp.yaml" "$here/doc.json" "$here/cases.csv"
# shellcheck source=/dev/null
source "${EVALD_SOURCE_DIR:?}/cli/evald-cli.bash-completion"
fails=0
offers() { # offers WANT WORD...: the completions of the last word, sorted, are WANT
    local want=$1
    shift
    COMP_WORDS=("$@")
    COMP_CWORD=$((${#COMP_WORDS[@]} - 1))
    COMPREPLY=()
    _evald_cli
    local got
    got=$(printf '%s\n' "${COMPREPLY[@]}" | sort | tr '\n' ' ')
    if [ "$got" != "$want " ]; then
        echo "FAIL: [$*] offers [$got], not [$want ]"
        fails=$((fails + 1))
    fi
}
offers "cancel export plan run show watch" evald-cli experiment ""
offers "$here/exp.yaml" evald-cli experiment plan "$here/ex"
offers "--json" evald-cli experiment plan "$here/exp.yaml" --js
offers "--detach" evald-cli experiment run "$here/exp.yaml" --de
offers "experiment" evald-cli --url http://127.0.0.1:1 ex
offers "$here/doc.json" evald-cli experiment run "$here/exp.yaml" --json "$here/doc"
offers "--detach" evald-cli experiment run "$here/exp.yaml" --json "$here/doc.json" --det
offers "--detach" evald-cli experiment show --json exp_1 --det
offers "--detach" evald-cli experiment show exp_1 --json --det
offers "$here/exp.yaml" evald-cli experiment run "$here/ex"
offers "$here/cases.csv" evald-cli dataset import "$here/c"
offers "github" evald-cli experiment run "$here/exp.yaml" --format g
offers "better" evald-cli experiment run "$here/exp.yaml" --require ""
[ $fails = 0 ] && echo "completion: all offers as expected"
exit $fails
