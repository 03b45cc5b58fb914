# fish completion for qd: commands, flags, agent and lane names.
# Save it as ~/.config/fish/completions/qd.fish, or load it with
# `qd completion fish | source`.

function __qd_complete
    set -l words (commandline -opc)
    set -l cur (commandline -ct)
    set -l qd $words[1]
    set -e words[1]
    set -l out ($qd __complete $words "$cur" 2>/dev/null)
    if test "$out[1]" = :files
        set -l head (string match -r -- '^-[^=]*=' "$cur")
        for f in (__fish_complete_path (string replace -r -- '^-[^=]*=' '' "$cur"))
            echo "$head$f"
        end
        return
    end
    test (count $out) -gt 0; and printf '%s\n' $out
end

complete -c qd -f -a '(__qd_complete)'
