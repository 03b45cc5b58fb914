# bash completion for qd: commands, flags, agent and lane names.
# Load it with `source <(qd completion bash)` in ~/.bashrc, or save it as
# ~/.local/share/bash-completion/completions/qd.

_qd() {
    local line=${COMP_LINE:0:COMP_POINT}
    local -a words
    read -r -a words <<<"$line"
    if [[ -z $line || $line == *[[:space:]] ]]; then
        words+=("")
    fi
    local cur=${words[${#words[@]}-1]}
    # Readline replaces only what follows the last = or : of the word.
    local head=""
    local breaks=""
    [[ $COMP_WORDBREAKS == *=* ]] && breaks+="="
    [[ $COMP_WORDBREAKS == *:* ]] && breaks+=":"
    if [[ -n $breaks && $cur == *[$breaks]* ]]; then
        head=${cur%"${cur##*[$breaks]}"}
    fi
    local out
    out=$("${words[0]}" __complete "${words[@]:1}" 2>/dev/null) || return 0
    COMPREPLY=()
    if [[ $out == :files ]]; then
        type compopt &>/dev/null && compopt -o filenames
        local f
        while IFS= read -r f; do
            COMPREPLY+=("$f")
        done < <(compgen -f -- "${cur#"$head"}")
        return 0
    fi
    local cand
    while IFS= read -r cand; do
        cand=${cand%%$'\t'*}
        [[ -n $cand && $cand == "$head"* ]] && COMPREPLY+=("${cand#"$head"}")
    done <<<"$out"
    return 0
}

complete -F _qd qd
