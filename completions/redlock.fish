# Print an optspec for argparse to handle cmd's options that are independent of any subcommand.
function __fish_redlock_global_optspecs
    string join \n url= password-file= prefix= timeout= sentinel-password-file= sentinel-user= tls-ca-file= tls-cert-file= tls-key-file= tls-insecure v/verbose q/quiet log-format= h/help V/version
end

function __fish_redlock_needs_command
    # Figure out if the current invocation already has a command.
    set -l cmd (commandline -opc)
    set -e cmd[1]
    argparse -s (__fish_redlock_global_optspecs) -- $cmd 2>/dev/null
    or return
    if set -q argv[1]
        # Also print the command, so this can be used to figure out what it is.
        echo $argv[1]
        return 1
    end
    return 0
end

function __fish_redlock_using_subcommand
    set -l cmd (__fish_redlock_needs_command)
    test -z "$cmd"
    and return 1
    contains -- $cmd[1] $argv
end

complete -c redlock -n "__fish_redlock_needs_command" -l url -d 'Redis server URL [default: redis://127.0.0.1:6379]' -r
complete -c redlock -n "__fish_redlock_needs_command" -l password-file -d 'File holding the Redis password (first line)' -r -F
complete -c redlock -n "__fish_redlock_needs_command" -l prefix -d 'Namespace prepended to every key, so staging never blocks production' -r
complete -c redlock -n "__fish_redlock_needs_command" -l timeout -d 'Connect and command timeout for talking to Redis outside the heartbeat' -r
complete -c redlock -n "__fish_redlock_needs_command" -l sentinel-password-file -d 'File holding the sentinels\' own password (first line)' -r -F
complete -c redlock -n "__fish_redlock_needs_command" -l sentinel-user -d 'ACL user the sentinels know redlock as (with --sentinel-password-file)' -r
complete -c redlock -n "__fish_redlock_needs_command" -l tls-ca-file -d 'CA certificate(s) (PEM) to verify TLS servers with, instead of the system\'s' -r -F
complete -c redlock -n "__fish_redlock_needs_command" -l tls-cert-file -d 'Client certificate (PEM) for servers that require one (with --tls-key-file)' -r -F
complete -c redlock -n "__fish_redlock_needs_command" -l tls-key-file -d 'Private key (PEM) of the client certificate' -r -F
complete -c redlock -n "__fish_redlock_needs_command" -l log-format -d 'Format of redlock\'s own messages on stderr' -r -f -a "text\t'`redlock: message` lines'
json\t'One JSON object per line'"
complete -c redlock -n "__fish_redlock_needs_command" -l tls-insecure -d 'Do not verify the server\'s certificate (TLS URLs only; prints a warning)'
complete -c redlock -n "__fish_redlock_needs_command" -s v -l verbose -d 'Print a timeline of what redlock does on stderr'
complete -c redlock -n "__fish_redlock_needs_command" -s q -l quiet -d 'Print only the final error line'
complete -c redlock -n "__fish_redlock_needs_command" -s h -l help -d 'Print help (see more with \'--help\')'
complete -c redlock -n "__fish_redlock_needs_command" -s V -l version -d 'Print version'
complete -c redlock -n "__fish_redlock_needs_command" -f -a "run" -d 'Run a command while holding the lock'
complete -c redlock -n "__fish_redlock_needs_command" -f -a "status" -d 'Show who holds a lock, since when, and how its last run ended (0 held, 1 free)'
complete -c redlock -n "__fish_redlock_needs_command" -f -a "release" -d 'Release a lock by its token, or force it (0 released, 1 nothing released)'
complete -c redlock -n "__fish_redlock_needs_command" -f -a "acquire" -d 'Take the lock and print its token, for shell scripts'
complete -c redlock -n "__fish_redlock_needs_command" -f -a "extend" -d 'Renew a lock held by TOKEN (0 renewed, 1 not the holder)'
complete -c redlock -n "__fish_redlock_needs_command" -f -a "doctor" -d 'Check the server for lock hazards and print each finding with its fix'
complete -c redlock -n "__fish_redlock_needs_command" -f -a "pause" -d 'Refuse new runs of locks (for maintenance); with --drain, wait for the running ones'
complete -c redlock -n "__fish_redlock_needs_command" -f -a "resume" -d 'Lift a pause: new runs of the locks go ahead again'
complete -c redlock -n "__fish_redlock_needs_command" -f -a "metrics" -d 'Print locks\' state and counters as Prometheus metrics'
complete -c redlock -n "__fish_redlock_needs_command" -f -a "check" -d 'Health check for Nagios/Icinga: 0 OK, 1 WARNING, 2 CRITICAL, 3 UNKNOWN'
complete -c redlock -n "__fish_redlock_needs_command" -f -a "log" -d 'Print locks\' audit log: acquires, refusals, releases, lost leases, forced releases, pauses and resumes, oldest first'
complete -c redlock -n "__fish_redlock_using_subcommand run" -l key -d 'The lock key (the prefix is prepended); repeated, all the keys or none' -r
complete -c redlock -n "__fish_redlock_using_subcommand run" -l ttl -d 'Lease length; renewed every TTL/3 while the command runs' -r
complete -c redlock -n "__fish_redlock_using_subcommand run" -s c -d 'Run this through `sh -c` instead of a command after `--`' -r
complete -c redlock -n "__fish_redlock_using_subcommand run" -l slots -d 'Let up to N holders hold the lock at once; the command gets REDLOCK_SLOT' -r
complete -c redlock -n "__fish_redlock_using_subcommand run" -l replicas -d 'Count the grant and each renewal only once N replicas acknowledged it (Redis WAIT)' -r
complete -c redlock -n "__fish_redlock_using_subcommand run" -l hold-at-least -d 'Keep the lock at least this long after acquiring it, even when the command ends sooner' -r
complete -c redlock -n "__fish_redlock_using_subcommand run" -l wait -d 'Wait up to this long for a busy lock instead of giving up at once' -r
complete -c redlock -n "__fish_redlock_using_subcommand run" -l max-waiters -d 'With --wait: queue only while fewer than N runs wait; otherwise busy at once' -r
complete -c redlock -n "__fish_redlock_using_subcommand run" -l conflict-exit-code -d 'Exit status when the lock is busy (instead of 75); 0 counts a skipped run as success' -r
complete -c redlock -n "__fish_redlock_using_subcommand run" -l once-per -d 'Run at most once per window of this length on the Redis server\'s clock' -r
complete -c redlock -n "__fish_redlock_using_subcommand run" -l max-runtime -d 'Stop the command\'s whole tree this long after the lock was taken (exit 124)' -r
complete -c redlock -n "__fish_redlock_using_subcommand run" -l kill-after -d 'Grace between SIGTERM and SIGKILL when redlock must stop the command [default: TTL/5, at most 10s]' -r
complete -c redlock -n "__fish_redlock_using_subcommand run" -l contain -d 'How redlock finds every process the command starts' -r -f -a "auto\t'A cgroup of its own where redlock may create one, otherwise redlock\'s descendants'
descendants\t'redlock\'s descendants, found by walking /proc (no cgroup is created)'"
complete -c redlock -n "__fish_redlock_using_subcommand run" -l label -d 'Recorded (holder and last-run records, `status`) instead of the command' -r
complete -c redlock -n "__fish_redlock_using_subcommand run" -l metrics-file -d 'When the run ends, write the key\'s Prometheus metrics to this file' -r -F
complete -c redlock -n "__fish_redlock_using_subcommand run" -l url -d 'Redis server URL [default: redis://127.0.0.1:6379]' -r
complete -c redlock -n "__fish_redlock_using_subcommand run" -l password-file -d 'File holding the Redis password (first line)' -r -F
complete -c redlock -n "__fish_redlock_using_subcommand run" -l prefix -d 'Namespace prepended to every key, so staging never blocks production' -r
complete -c redlock -n "__fish_redlock_using_subcommand run" -l timeout -d 'Connect and command timeout for talking to Redis outside the heartbeat' -r
complete -c redlock -n "__fish_redlock_using_subcommand run" -l sentinel-password-file -d 'File holding the sentinels\' own password (first line)' -r -F
complete -c redlock -n "__fish_redlock_using_subcommand run" -l sentinel-user -d 'ACL user the sentinels know redlock as (with --sentinel-password-file)' -r
complete -c redlock -n "__fish_redlock_using_subcommand run" -l tls-ca-file -d 'CA certificate(s) (PEM) to verify TLS servers with, instead of the system\'s' -r -F
complete -c redlock -n "__fish_redlock_using_subcommand run" -l tls-cert-file -d 'Client certificate (PEM) for servers that require one (with --tls-key-file)' -r -F
complete -c redlock -n "__fish_redlock_using_subcommand run" -l tls-key-file -d 'Private key (PEM) of the client certificate' -r -F
complete -c redlock -n "__fish_redlock_using_subcommand run" -l log-format -d 'Format of redlock\'s own messages on stderr' -r -f -a "text\t'`redlock: message` lines'
json\t'One JSON object per line'"
complete -c redlock -n "__fish_redlock_using_subcommand run" -l shared -d 'Hold the lock shared: any number of shared holders, no exclusive one'
complete -c redlock -n "__fish_redlock_using_subcommand run" -l replace -d 'Ask the running holder to stop, and run once its command is gone'
complete -c redlock -n "__fish_redlock_using_subcommand run" -l no-replace -d 'Never be stopped by a run with --replace (not with --replace itself)'
complete -c redlock -n "__fish_redlock_using_subcommand run" -l retry-failed -d 'With --once-per: run again in a window whose first run failed'
complete -c redlock -n "__fish_redlock_using_subcommand run" -l tls-insecure -d 'Do not verify the server\'s certificate (TLS URLs only; prints a warning)'
complete -c redlock -n "__fish_redlock_using_subcommand run" -s v -l verbose -d 'Print a timeline of what redlock does on stderr'
complete -c redlock -n "__fish_redlock_using_subcommand run" -s q -l quiet -d 'Print only the final error line'
complete -c redlock -n "__fish_redlock_using_subcommand run" -s h -l help -d 'Print help (see more with \'--help\')'
complete -c redlock -n "__fish_redlock_using_subcommand status" -l url -d 'Redis server URL [default: redis://127.0.0.1:6379]' -r
complete -c redlock -n "__fish_redlock_using_subcommand status" -l password-file -d 'File holding the Redis password (first line)' -r -F
complete -c redlock -n "__fish_redlock_using_subcommand status" -l prefix -d 'Namespace prepended to every key, so staging never blocks production' -r
complete -c redlock -n "__fish_redlock_using_subcommand status" -l timeout -d 'Connect and command timeout for talking to Redis outside the heartbeat' -r
complete -c redlock -n "__fish_redlock_using_subcommand status" -l sentinel-password-file -d 'File holding the sentinels\' own password (first line)' -r -F
complete -c redlock -n "__fish_redlock_using_subcommand status" -l sentinel-user -d 'ACL user the sentinels know redlock as (with --sentinel-password-file)' -r
complete -c redlock -n "__fish_redlock_using_subcommand status" -l tls-ca-file -d 'CA certificate(s) (PEM) to verify TLS servers with, instead of the system\'s' -r -F
complete -c redlock -n "__fish_redlock_using_subcommand status" -l tls-cert-file -d 'Client certificate (PEM) for servers that require one (with --tls-key-file)' -r -F
complete -c redlock -n "__fish_redlock_using_subcommand status" -l tls-key-file -d 'Private key (PEM) of the client certificate' -r -F
complete -c redlock -n "__fish_redlock_using_subcommand status" -l log-format -d 'Format of redlock\'s own messages on stderr' -r -f -a "text\t'`redlock: message` lines'
json\t'One JSON object per line'"
complete -c redlock -n "__fish_redlock_using_subcommand status" -l all -d 'Every lock redlock created under the prefix (found with SCAN)'
complete -c redlock -n "__fish_redlock_using_subcommand status" -l json -d 'One JSON document on stdout'
complete -c redlock -n "__fish_redlock_using_subcommand status" -l show-token -d 'Include the holder\'s token'
complete -c redlock -n "__fish_redlock_using_subcommand status" -l tls-insecure -d 'Do not verify the server\'s certificate (TLS URLs only; prints a warning)'
complete -c redlock -n "__fish_redlock_using_subcommand status" -s v -l verbose -d 'Print a timeline of what redlock does on stderr'
complete -c redlock -n "__fish_redlock_using_subcommand status" -s q -l quiet -d 'Print only the final error line'
complete -c redlock -n "__fish_redlock_using_subcommand status" -s h -l help -d 'Print help (see more with \'--help\')'
complete -c redlock -n "__fish_redlock_using_subcommand release" -l token -d 'Release only if this is the holder\'s token' -r
complete -c redlock -n "__fish_redlock_using_subcommand release" -l url -d 'Redis server URL [default: redis://127.0.0.1:6379]' -r
complete -c redlock -n "__fish_redlock_using_subcommand release" -l password-file -d 'File holding the Redis password (first line)' -r -F
complete -c redlock -n "__fish_redlock_using_subcommand release" -l prefix -d 'Namespace prepended to every key, so staging never blocks production' -r
complete -c redlock -n "__fish_redlock_using_subcommand release" -l timeout -d 'Connect and command timeout for talking to Redis outside the heartbeat' -r
complete -c redlock -n "__fish_redlock_using_subcommand release" -l sentinel-password-file -d 'File holding the sentinels\' own password (first line)' -r -F
complete -c redlock -n "__fish_redlock_using_subcommand release" -l sentinel-user -d 'ACL user the sentinels know redlock as (with --sentinel-password-file)' -r
complete -c redlock -n "__fish_redlock_using_subcommand release" -l tls-ca-file -d 'CA certificate(s) (PEM) to verify TLS servers with, instead of the system\'s' -r -F
complete -c redlock -n "__fish_redlock_using_subcommand release" -l tls-cert-file -d 'Client certificate (PEM) for servers that require one (with --tls-key-file)' -r -F
complete -c redlock -n "__fish_redlock_using_subcommand release" -l tls-key-file -d 'Private key (PEM) of the client certificate' -r -F
complete -c redlock -n "__fish_redlock_using_subcommand release" -l log-format -d 'Format of redlock\'s own messages on stderr' -r -f -a "text\t'`redlock: message` lines'
json\t'One JSON object per line'"
complete -c redlock -n "__fish_redlock_using_subcommand release" -l force -d 'Delete the lock whoever holds it, and say whom it removed'
complete -c redlock -n "__fish_redlock_using_subcommand release" -l tls-insecure -d 'Do not verify the server\'s certificate (TLS URLs only; prints a warning)'
complete -c redlock -n "__fish_redlock_using_subcommand release" -s v -l verbose -d 'Print a timeline of what redlock does on stderr'
complete -c redlock -n "__fish_redlock_using_subcommand release" -s q -l quiet -d 'Print only the final error line'
complete -c redlock -n "__fish_redlock_using_subcommand release" -s h -l help -d 'Print help (see more with \'--help\')'
complete -c redlock -n "__fish_redlock_using_subcommand acquire" -l key -d 'The lock key (the prefix is prepended); repeated, all the keys or none' -r
complete -c redlock -n "__fish_redlock_using_subcommand acquire" -l ttl -d 'Lease length; keep it alive with `redlock extend`' -r
complete -c redlock -n "__fish_redlock_using_subcommand acquire" -l wait -d 'Wait up to this long for a busy lock' -r
complete -c redlock -n "__fish_redlock_using_subcommand acquire" -l slots -d 'Take one of N slots (see `redlock run --slots`); the slot is printed on a third line' -r
complete -c redlock -n "__fish_redlock_using_subcommand acquire" -l label -d 'Recorded (holder and last-run records, `status`) instead of the calling command line' -r
complete -c redlock -n "__fish_redlock_using_subcommand acquire" -l replicas -d 'Count the grant only once N replicas acknowledged it (see `redlock run --replicas`)' -r
complete -c redlock -n "__fish_redlock_using_subcommand acquire" -l url -d 'Redis server URL [default: redis://127.0.0.1:6379]' -r
complete -c redlock -n "__fish_redlock_using_subcommand acquire" -l password-file -d 'File holding the Redis password (first line)' -r -F
complete -c redlock -n "__fish_redlock_using_subcommand acquire" -l prefix -d 'Namespace prepended to every key, so staging never blocks production' -r
complete -c redlock -n "__fish_redlock_using_subcommand acquire" -l timeout -d 'Connect and command timeout for talking to Redis outside the heartbeat' -r
complete -c redlock -n "__fish_redlock_using_subcommand acquire" -l sentinel-password-file -d 'File holding the sentinels\' own password (first line)' -r -F
complete -c redlock -n "__fish_redlock_using_subcommand acquire" -l sentinel-user -d 'ACL user the sentinels know redlock as (with --sentinel-password-file)' -r
complete -c redlock -n "__fish_redlock_using_subcommand acquire" -l tls-ca-file -d 'CA certificate(s) (PEM) to verify TLS servers with, instead of the system\'s' -r -F
complete -c redlock -n "__fish_redlock_using_subcommand acquire" -l tls-cert-file -d 'Client certificate (PEM) for servers that require one (with --tls-key-file)' -r -F
complete -c redlock -n "__fish_redlock_using_subcommand acquire" -l tls-key-file -d 'Private key (PEM) of the client certificate' -r -F
complete -c redlock -n "__fish_redlock_using_subcommand acquire" -l log-format -d 'Format of redlock\'s own messages on stderr' -r -f -a "text\t'`redlock: message` lines'
json\t'One JSON object per line'"
complete -c redlock -n "__fish_redlock_using_subcommand acquire" -l shared -d 'Take a shared hold (see `redlock run --shared`)'
complete -c redlock -n "__fish_redlock_using_subcommand acquire" -l json -d 'Print {"token", "fence", "deadline_ms", ...} as one JSON object'
complete -c redlock -n "__fish_redlock_using_subcommand acquire" -l tls-insecure -d 'Do not verify the server\'s certificate (TLS URLs only; prints a warning)'
complete -c redlock -n "__fish_redlock_using_subcommand acquire" -s v -l verbose -d 'Print a timeline of what redlock does on stderr'
complete -c redlock -n "__fish_redlock_using_subcommand acquire" -s q -l quiet -d 'Print only the final error line'
complete -c redlock -n "__fish_redlock_using_subcommand acquire" -s h -l help -d 'Print help (see more with \'--help\')'
complete -c redlock -n "__fish_redlock_using_subcommand extend" -l key -d 'The lock key; repeated: the keys `acquire --key A --key B` took' -r
complete -c redlock -n "__fish_redlock_using_subcommand extend" -l token -d 'The token `redlock acquire` printed' -r
complete -c redlock -n "__fish_redlock_using_subcommand extend" -l ttl -d 'New lease length, from now' -r
complete -c redlock -n "__fish_redlock_using_subcommand extend" -l replicas -d 'Count the renewal only once N replicas acknowledged it (see `redlock run --replicas`)' -r
complete -c redlock -n "__fish_redlock_using_subcommand extend" -l url -d 'Redis server URL [default: redis://127.0.0.1:6379]' -r
complete -c redlock -n "__fish_redlock_using_subcommand extend" -l password-file -d 'File holding the Redis password (first line)' -r -F
complete -c redlock -n "__fish_redlock_using_subcommand extend" -l prefix -d 'Namespace prepended to every key, so staging never blocks production' -r
complete -c redlock -n "__fish_redlock_using_subcommand extend" -l timeout -d 'Connect and command timeout for talking to Redis outside the heartbeat' -r
complete -c redlock -n "__fish_redlock_using_subcommand extend" -l sentinel-password-file -d 'File holding the sentinels\' own password (first line)' -r -F
complete -c redlock -n "__fish_redlock_using_subcommand extend" -l sentinel-user -d 'ACL user the sentinels know redlock as (with --sentinel-password-file)' -r
complete -c redlock -n "__fish_redlock_using_subcommand extend" -l tls-ca-file -d 'CA certificate(s) (PEM) to verify TLS servers with, instead of the system\'s' -r -F
complete -c redlock -n "__fish_redlock_using_subcommand extend" -l tls-cert-file -d 'Client certificate (PEM) for servers that require one (with --tls-key-file)' -r -F
complete -c redlock -n "__fish_redlock_using_subcommand extend" -l tls-key-file -d 'Private key (PEM) of the client certificate' -r -F
complete -c redlock -n "__fish_redlock_using_subcommand extend" -l log-format -d 'Format of redlock\'s own messages on stderr' -r -f -a "text\t'`redlock: message` lines'
json\t'One JSON object per line'"
complete -c redlock -n "__fish_redlock_using_subcommand extend" -l tls-insecure -d 'Do not verify the server\'s certificate (TLS URLs only; prints a warning)'
complete -c redlock -n "__fish_redlock_using_subcommand extend" -s v -l verbose -d 'Print a timeline of what redlock does on stderr'
complete -c redlock -n "__fish_redlock_using_subcommand extend" -s q -l quiet -d 'Print only the final error line'
complete -c redlock -n "__fish_redlock_using_subcommand extend" -s h -l help -d 'Print help (see more with \'--help\')'
complete -c redlock -n "__fish_redlock_using_subcommand doctor" -l replicas -d 'Check that N replicas acknowledge writes, as `redlock run --replicas N` needs' -r
complete -c redlock -n "__fish_redlock_using_subcommand doctor" -l url -d 'Redis server URL [default: redis://127.0.0.1:6379]' -r
complete -c redlock -n "__fish_redlock_using_subcommand doctor" -l password-file -d 'File holding the Redis password (first line)' -r -F
complete -c redlock -n "__fish_redlock_using_subcommand doctor" -l prefix -d 'Namespace prepended to every key, so staging never blocks production' -r
complete -c redlock -n "__fish_redlock_using_subcommand doctor" -l timeout -d 'Connect and command timeout for talking to Redis outside the heartbeat' -r
complete -c redlock -n "__fish_redlock_using_subcommand doctor" -l sentinel-password-file -d 'File holding the sentinels\' own password (first line)' -r -F
complete -c redlock -n "__fish_redlock_using_subcommand doctor" -l sentinel-user -d 'ACL user the sentinels know redlock as (with --sentinel-password-file)' -r
complete -c redlock -n "__fish_redlock_using_subcommand doctor" -l tls-ca-file -d 'CA certificate(s) (PEM) to verify TLS servers with, instead of the system\'s' -r -F
complete -c redlock -n "__fish_redlock_using_subcommand doctor" -l tls-cert-file -d 'Client certificate (PEM) for servers that require one (with --tls-key-file)' -r -F
complete -c redlock -n "__fish_redlock_using_subcommand doctor" -l tls-key-file -d 'Private key (PEM) of the client certificate' -r -F
complete -c redlock -n "__fish_redlock_using_subcommand doctor" -l log-format -d 'Format of redlock\'s own messages on stderr' -r -f -a "text\t'`redlock: message` lines'
json\t'One JSON object per line'"
complete -c redlock -n "__fish_redlock_using_subcommand doctor" -l tls-insecure -d 'Do not verify the server\'s certificate (TLS URLs only; prints a warning)'
complete -c redlock -n "__fish_redlock_using_subcommand doctor" -s v -l verbose -d 'Print a timeline of what redlock does on stderr'
complete -c redlock -n "__fish_redlock_using_subcommand doctor" -s q -l quiet -d 'Print only the final error line'
complete -c redlock -n "__fish_redlock_using_subcommand doctor" -s h -l help -d 'Print help (see more with \'--help\')'
complete -c redlock -n "__fish_redlock_using_subcommand pause" -l for -d 'Lift the pause by itself after this long [default: until resumed]' -r
complete -c redlock -n "__fish_redlock_using_subcommand pause" -l reason -d 'Why, shown to every run that is refused' -r
complete -c redlock -n "__fish_redlock_using_subcommand pause" -l drain -d 'Then wait up to this long until no paused lock has a running holder (exit 75 if some still run)' -r
complete -c redlock -n "__fish_redlock_using_subcommand pause" -l url -d 'Redis server URL [default: redis://127.0.0.1:6379]' -r
complete -c redlock -n "__fish_redlock_using_subcommand pause" -l password-file -d 'File holding the Redis password (first line)' -r -F
complete -c redlock -n "__fish_redlock_using_subcommand pause" -l prefix -d 'Namespace prepended to every key, so staging never blocks production' -r
complete -c redlock -n "__fish_redlock_using_subcommand pause" -l timeout -d 'Connect and command timeout for talking to Redis outside the heartbeat' -r
complete -c redlock -n "__fish_redlock_using_subcommand pause" -l sentinel-password-file -d 'File holding the sentinels\' own password (first line)' -r -F
complete -c redlock -n "__fish_redlock_using_subcommand pause" -l sentinel-user -d 'ACL user the sentinels know redlock as (with --sentinel-password-file)' -r
complete -c redlock -n "__fish_redlock_using_subcommand pause" -l tls-ca-file -d 'CA certificate(s) (PEM) to verify TLS servers with, instead of the system\'s' -r -F
complete -c redlock -n "__fish_redlock_using_subcommand pause" -l tls-cert-file -d 'Client certificate (PEM) for servers that require one (with --tls-key-file)' -r -F
complete -c redlock -n "__fish_redlock_using_subcommand pause" -l tls-key-file -d 'Private key (PEM) of the client certificate' -r -F
complete -c redlock -n "__fish_redlock_using_subcommand pause" -l log-format -d 'Format of redlock\'s own messages on stderr' -r -f -a "text\t'`redlock: message` lines'
json\t'One JSON object per line'"
complete -c redlock -n "__fish_redlock_using_subcommand pause" -l all -d 'Pause every lock under the prefix, existing or not (one prefix-wide record)'
complete -c redlock -n "__fish_redlock_using_subcommand pause" -l tls-insecure -d 'Do not verify the server\'s certificate (TLS URLs only; prints a warning)'
complete -c redlock -n "__fish_redlock_using_subcommand pause" -s v -l verbose -d 'Print a timeline of what redlock does on stderr'
complete -c redlock -n "__fish_redlock_using_subcommand pause" -s q -l quiet -d 'Print only the final error line'
complete -c redlock -n "__fish_redlock_using_subcommand pause" -s h -l help -d 'Print help (see more with \'--help\')'
complete -c redlock -n "__fish_redlock_using_subcommand resume" -l url -d 'Redis server URL [default: redis://127.0.0.1:6379]' -r
complete -c redlock -n "__fish_redlock_using_subcommand resume" -l password-file -d 'File holding the Redis password (first line)' -r -F
complete -c redlock -n "__fish_redlock_using_subcommand resume" -l prefix -d 'Namespace prepended to every key, so staging never blocks production' -r
complete -c redlock -n "__fish_redlock_using_subcommand resume" -l timeout -d 'Connect and command timeout for talking to Redis outside the heartbeat' -r
complete -c redlock -n "__fish_redlock_using_subcommand resume" -l sentinel-password-file -d 'File holding the sentinels\' own password (first line)' -r -F
complete -c redlock -n "__fish_redlock_using_subcommand resume" -l sentinel-user -d 'ACL user the sentinels know redlock as (with --sentinel-password-file)' -r
complete -c redlock -n "__fish_redlock_using_subcommand resume" -l tls-ca-file -d 'CA certificate(s) (PEM) to verify TLS servers with, instead of the system\'s' -r -F
complete -c redlock -n "__fish_redlock_using_subcommand resume" -l tls-cert-file -d 'Client certificate (PEM) for servers that require one (with --tls-key-file)' -r -F
complete -c redlock -n "__fish_redlock_using_subcommand resume" -l tls-key-file -d 'Private key (PEM) of the client certificate' -r -F
complete -c redlock -n "__fish_redlock_using_subcommand resume" -l log-format -d 'Format of redlock\'s own messages on stderr' -r -f -a "text\t'`redlock: message` lines'
json\t'One JSON object per line'"
complete -c redlock -n "__fish_redlock_using_subcommand resume" -l all -d 'Lift the prefix-wide pause and every key\'s own pause under the prefix'
complete -c redlock -n "__fish_redlock_using_subcommand resume" -l tls-insecure -d 'Do not verify the server\'s certificate (TLS URLs only; prints a warning)'
complete -c redlock -n "__fish_redlock_using_subcommand resume" -s v -l verbose -d 'Print a timeline of what redlock does on stderr'
complete -c redlock -n "__fish_redlock_using_subcommand resume" -s q -l quiet -d 'Print only the final error line'
complete -c redlock -n "__fish_redlock_using_subcommand resume" -s h -l help -d 'Print help (see more with \'--help\')'
complete -c redlock -n "__fish_redlock_using_subcommand metrics" -l url -d 'Redis server URL [default: redis://127.0.0.1:6379]' -r
complete -c redlock -n "__fish_redlock_using_subcommand metrics" -l password-file -d 'File holding the Redis password (first line)' -r -F
complete -c redlock -n "__fish_redlock_using_subcommand metrics" -l prefix -d 'Namespace prepended to every key, so staging never blocks production' -r
complete -c redlock -n "__fish_redlock_using_subcommand metrics" -l timeout -d 'Connect and command timeout for talking to Redis outside the heartbeat' -r
complete -c redlock -n "__fish_redlock_using_subcommand metrics" -l sentinel-password-file -d 'File holding the sentinels\' own password (first line)' -r -F
complete -c redlock -n "__fish_redlock_using_subcommand metrics" -l sentinel-user -d 'ACL user the sentinels know redlock as (with --sentinel-password-file)' -r
complete -c redlock -n "__fish_redlock_using_subcommand metrics" -l tls-ca-file -d 'CA certificate(s) (PEM) to verify TLS servers with, instead of the system\'s' -r -F
complete -c redlock -n "__fish_redlock_using_subcommand metrics" -l tls-cert-file -d 'Client certificate (PEM) for servers that require one (with --tls-key-file)' -r -F
complete -c redlock -n "__fish_redlock_using_subcommand metrics" -l tls-key-file -d 'Private key (PEM) of the client certificate' -r -F
complete -c redlock -n "__fish_redlock_using_subcommand metrics" -l log-format -d 'Format of redlock\'s own messages on stderr' -r -f -a "text\t'`redlock: message` lines'
json\t'One JSON object per line'"
complete -c redlock -n "__fish_redlock_using_subcommand metrics" -l all -d 'Every lock redlock created under the prefix (found with SCAN)'
complete -c redlock -n "__fish_redlock_using_subcommand metrics" -l tls-insecure -d 'Do not verify the server\'s certificate (TLS URLs only; prints a warning)'
complete -c redlock -n "__fish_redlock_using_subcommand metrics" -s v -l verbose -d 'Print a timeline of what redlock does on stderr'
complete -c redlock -n "__fish_redlock_using_subcommand metrics" -s q -l quiet -d 'Print only the final error line'
complete -c redlock -n "__fish_redlock_using_subcommand metrics" -s h -l help -d 'Print help (see more with \'--help\')'
complete -c redlock -n "__fish_redlock_using_subcommand check" -l max-age -d 'CRITICAL when a holder has held a lock longer than this' -r
complete -c redlock -n "__fish_redlock_using_subcommand check" -l max-since-success -d 'CRITICAL when no run of a key ended ok within this long' -r
complete -c redlock -n "__fish_redlock_using_subcommand check" -l url -d 'Redis server URL [default: redis://127.0.0.1:6379]' -r
complete -c redlock -n "__fish_redlock_using_subcommand check" -l password-file -d 'File holding the Redis password (first line)' -r -F
complete -c redlock -n "__fish_redlock_using_subcommand check" -l prefix -d 'Namespace prepended to every key, so staging never blocks production' -r
complete -c redlock -n "__fish_redlock_using_subcommand check" -l timeout -d 'Connect and command timeout for talking to Redis outside the heartbeat' -r
complete -c redlock -n "__fish_redlock_using_subcommand check" -l sentinel-password-file -d 'File holding the sentinels\' own password (first line)' -r -F
complete -c redlock -n "__fish_redlock_using_subcommand check" -l sentinel-user -d 'ACL user the sentinels know redlock as (with --sentinel-password-file)' -r
complete -c redlock -n "__fish_redlock_using_subcommand check" -l tls-ca-file -d 'CA certificate(s) (PEM) to verify TLS servers with, instead of the system\'s' -r -F
complete -c redlock -n "__fish_redlock_using_subcommand check" -l tls-cert-file -d 'Client certificate (PEM) for servers that require one (with --tls-key-file)' -r -F
complete -c redlock -n "__fish_redlock_using_subcommand check" -l tls-key-file -d 'Private key (PEM) of the client certificate' -r -F
complete -c redlock -n "__fish_redlock_using_subcommand check" -l log-format -d 'Format of redlock\'s own messages on stderr' -r -f -a "text\t'`redlock: message` lines'
json\t'One JSON object per line'"
complete -c redlock -n "__fish_redlock_using_subcommand check" -l json -d 'One JSON object on stdout instead of the plugin line'
complete -c redlock -n "__fish_redlock_using_subcommand check" -l tls-insecure -d 'Do not verify the server\'s certificate (TLS URLs only; prints a warning)'
complete -c redlock -n "__fish_redlock_using_subcommand check" -s v -l verbose -d 'Print a timeline of what redlock does on stderr'
complete -c redlock -n "__fish_redlock_using_subcommand check" -s q -l quiet -d 'Print only the final error line'
complete -c redlock -n "__fish_redlock_using_subcommand check" -s h -l help -d 'Print help (see more with \'--help\')'
complete -c redlock -n "__fish_redlock_using_subcommand log" -l since -d 'Only entries from this long ago onwards (by this host\'s clock)' -r
complete -c redlock -n "__fish_redlock_using_subcommand log" -l width -d 'The timeline\'s width in columns, at least 40 (default: $COLUMNS when it is a positive number, else the terminal\'s, else 80; never below 40)' -r
complete -c redlock -n "__fish_redlock_using_subcommand log" -l url -d 'Redis server URL [default: redis://127.0.0.1:6379]' -r
complete -c redlock -n "__fish_redlock_using_subcommand log" -l password-file -d 'File holding the Redis password (first line)' -r -F
complete -c redlock -n "__fish_redlock_using_subcommand log" -l prefix -d 'Namespace prepended to every key, so staging never blocks production' -r
complete -c redlock -n "__fish_redlock_using_subcommand log" -l timeout -d 'Connect and command timeout for talking to Redis outside the heartbeat' -r
complete -c redlock -n "__fish_redlock_using_subcommand log" -l sentinel-password-file -d 'File holding the sentinels\' own password (first line)' -r -F
complete -c redlock -n "__fish_redlock_using_subcommand log" -l sentinel-user -d 'ACL user the sentinels know redlock as (with --sentinel-password-file)' -r
complete -c redlock -n "__fish_redlock_using_subcommand log" -l tls-ca-file -d 'CA certificate(s) (PEM) to verify TLS servers with, instead of the system\'s' -r -F
complete -c redlock -n "__fish_redlock_using_subcommand log" -l tls-cert-file -d 'Client certificate (PEM) for servers that require one (with --tls-key-file)' -r -F
complete -c redlock -n "__fish_redlock_using_subcommand log" -l tls-key-file -d 'Private key (PEM) of the client certificate' -r -F
complete -c redlock -n "__fish_redlock_using_subcommand log" -l log-format -d 'Format of redlock\'s own messages on stderr' -r -f -a "text\t'`redlock: message` lines'
json\t'One JSON object per line'"
complete -c redlock -n "__fish_redlock_using_subcommand log" -l all -d 'Every lock under the prefix that has a log (found with SCAN), and the prefix-wide pauses and resumes'
complete -c redlock -n "__fish_redlock_using_subcommand log" -s f -l follow -d 'After the entries so far, print new ones as they come, until interrupted (SIGINT or SIGTERM: exit 0, or with --all the status of a lock it could not read)'
complete -c redlock -n "__fish_redlock_using_subcommand log" -l json -d 'One JSON object per line (JSON Lines) instead of text'
complete -c redlock -n "__fish_redlock_using_subcommand log" -l timeline -d 'Draw the keys\' runs as a timeline instead: holders as bars per host, refusals, how each hold ended, waits and pauses (plain ASCII when stdout is not a terminal)'
complete -c redlock -n "__fish_redlock_using_subcommand log" -l tls-insecure -d 'Do not verify the server\'s certificate (TLS URLs only; prints a warning)'
complete -c redlock -n "__fish_redlock_using_subcommand log" -s v -l verbose -d 'Print a timeline of what redlock does on stderr'
complete -c redlock -n "__fish_redlock_using_subcommand log" -s q -l quiet -d 'Print only the final error line'
complete -c redlock -n "__fish_redlock_using_subcommand log" -s h -l help -d 'Print help (see more with \'--help\')'
