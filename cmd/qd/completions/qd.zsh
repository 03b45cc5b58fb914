#compdef qd
# zsh completion for qd: commands, flags, agent and lane names.
# Load it with `source <(qd completion zsh)` in ~/.zshrc after compinit, or
# save it as _qd in a directory of $fpath.

_qd() {
    local -a out cands
    local line word
    out=("${(@f)$(${words[1]} __complete "${(@Q)words[2,CURRENT]}" 2>/dev/null)}")
    if [[ ${out[1]} == :files ]]; then
        compset -P '*='
        _files
        return
    fi
    for line in "${out[@]}"; do
        [[ -z $line ]] && continue
        word=${line%%$'\t'*}
        word=${word//:/\\:}
        if [[ $line == *$'\t'* ]]; then
            cands+=("$word:${line#*$'\t'}")
        else
            cands+=("$word")
        fi
    done
    (( ${#cands} )) && _describe -t qd 'qd' cands
}

if [[ ${funcstack[1]} == _qd ]]; then
    _qd "$@"
else
    compdef _qd qd
fi
