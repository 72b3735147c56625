
using namespace System.Management.Automation
using namespace System.Management.Automation.Language

Register-ArgumentCompleter -Native -CommandName 'redlock' -ScriptBlock {
    param($wordToComplete, $commandAst, $cursorPosition)

    $commandElements = $commandAst.CommandElements
    $command = @(
        'redlock'
        for ($i = 1; $i -lt $commandElements.Count; $i++) {
            $element = $commandElements[$i]
            if ($element -isnot [StringConstantExpressionAst] -or
                $element.StringConstantType -ne [StringConstantType]::BareWord -or
                $element.Value.StartsWith('-') -or
                $element.Value -eq $wordToComplete) {
                break
        }
        $element.Value
    }) -join ';'

    $completions = @(switch ($command) {
        'redlock' {
            [CompletionResult]::new('--url', '--url', [CompletionResultType]::ParameterName, 'Redis server URL: redis://, rediss:// or redis+unix://; repeat it for a quorum of independent masters; or one redis+cluster://HOST:PORT[,HOST:PORT...] or redis+sentinel://HOST:PORT[,HOST:PORT...]/SERVICE[/DB] (rediss+cluster:// and rediss+sentinel:// for TLS)')
            [CompletionResult]::new('--password-file', '--password-file', [CompletionResultType]::ParameterName, 'File holding the Redis password (first line); wins over a password in the URL')
            [CompletionResult]::new('--sentinel-password-file', '--sentinel-password-file', [CompletionResultType]::ParameterName, 'File holding the sentinels'' own password (first line), for redis+sentinel:// and rediss+sentinel://; the master''s password is --password-file''s')
            [CompletionResult]::new('--sentinel-user', '--sentinel-user', [CompletionResultType]::ParameterName, 'ACL user the sentinels know redlock as (with --sentinel-password-file)')
            [CompletionResult]::new('--prefix', '--prefix', [CompletionResultType]::ParameterName, 'Namespace prepended to every key, so staging never blocks production')
            [CompletionResult]::new('--timeout', '--timeout', [CompletionResultType]::ParameterName, 'Connect and command timeout for talking to Redis outside the heartbeat')
            [CompletionResult]::new('--tls-ca-file', '--tls-ca-file', [CompletionResultType]::ParameterName, 'CA certificate(s) (PEM) to verify TLS servers (rediss://, rediss+cluster://, rediss+sentinel://) with, instead of the system''s')
            [CompletionResult]::new('--tls-cert-file', '--tls-cert-file', [CompletionResultType]::ParameterName, 'Client certificate (PEM) for servers that require one (with --tls-key-file)')
            [CompletionResult]::new('--tls-key-file', '--tls-key-file', [CompletionResultType]::ParameterName, 'Private key (PEM) of the client certificate')
            [CompletionResult]::new('--log-format', '--log-format', [CompletionResultType]::ParameterName, 'Format of redlock''s own messages on stderr')
            [CompletionResult]::new('--tls-insecure', '--tls-insecure', [CompletionResultType]::ParameterName, 'Do not verify the server''s certificate (TLS URLs only; prints a warning)')
            [CompletionResult]::new('-v', '-v', [CompletionResultType]::ParameterName, 'Print a timeline of what redlock does on stderr')
            [CompletionResult]::new('--verbose', '--verbose', [CompletionResultType]::ParameterName, 'Print a timeline of what redlock does on stderr')
            [CompletionResult]::new('-q', '-q', [CompletionResultType]::ParameterName, 'Print only the final error line')
            [CompletionResult]::new('--quiet', '--quiet', [CompletionResultType]::ParameterName, 'Print only the final error line')
            [CompletionResult]::new('-h', '-h', [CompletionResultType]::ParameterName, 'Print help (see more with ''--help'')')
            [CompletionResult]::new('--help', '--help', [CompletionResultType]::ParameterName, 'Print help (see more with ''--help'')')
            [CompletionResult]::new('-V', '-V ', [CompletionResultType]::ParameterName, 'Print version')
            [CompletionResult]::new('--version', '--version', [CompletionResultType]::ParameterName, 'Print version')
            [CompletionResult]::new('run', 'run', [CompletionResultType]::ParameterValue, 'Run a command while holding the lock')
            [CompletionResult]::new('status', 'status', [CompletionResultType]::ParameterValue, 'Show who holds a lock, since when, and how its last run ended (0 held, 1 free)')
            [CompletionResult]::new('release', 'release', [CompletionResultType]::ParameterValue, 'Release a lock by its token, or force it (0 released, 1 nothing released)')
            [CompletionResult]::new('acquire', 'acquire', [CompletionResultType]::ParameterValue, 'Take the lock and print its token, for shell scripts')
            [CompletionResult]::new('extend', 'extend', [CompletionResultType]::ParameterValue, 'Renew a lock held by TOKEN (0 renewed, 1 not the holder)')
            [CompletionResult]::new('doctor', 'doctor', [CompletionResultType]::ParameterValue, 'Check the server for lock hazards and print each finding with its fix')
            break
        }
        'redlock;run' {
            [CompletionResult]::new('--key', '--key', [CompletionResultType]::ParameterName, 'The lock key (the prefix is prepended)')
            [CompletionResult]::new('--ttl', '--ttl', [CompletionResultType]::ParameterName, 'Lease length; renewed every TTL/3 while the command runs')
            [CompletionResult]::new('--wait', '--wait', [CompletionResultType]::ParameterName, 'Wait up to this long for a busy lock instead of giving up at once')
            [CompletionResult]::new('--conflict-exit-code', '--conflict-exit-code', [CompletionResultType]::ParameterName, 'Exit status when the lock is busy (instead of 75); 0 counts a skipped run as success')
            [CompletionResult]::new('--kill-after', '--kill-after', [CompletionResultType]::ParameterName, 'Grace between SIGTERM and SIGKILL when redlock must stop the command [default: TTL/5, at most 10s]')
            [CompletionResult]::new('--hold-at-least', '--hold-at-least', [CompletionResultType]::ParameterName, 'Keep the lock at least this long after acquiring it, even when the command ends sooner')
            [CompletionResult]::new('--max-runtime', '--max-runtime', [CompletionResultType]::ParameterName, 'Stop the command''s whole tree this long after the lock was taken: SIGTERM, SIGKILL --kill-after later; redlock then exits 124 (as timeout(1) does) and the run is recorded as timed out. Renewals never carry the lease past it plus the kill grace')
            [CompletionResult]::new('--contain', '--contain', [CompletionResultType]::ParameterName, 'How redlock finds every process the command starts: auto (a cgroup of its own where redlock may create one, otherwise its descendants), or descendants')
            [CompletionResult]::new('--label', '--label', [CompletionResultType]::ParameterName, 'Recorded (holder and last-run records, `status`) instead of the command')
            [CompletionResult]::new('-c', '-c', [CompletionResultType]::ParameterName, 'Run this through `sh -c` instead of a command after `--`')
            [CompletionResult]::new('--url', '--url', [CompletionResultType]::ParameterName, 'Redis server URL: redis://, rediss:// or redis+unix://; repeat it for a quorum of independent masters; or one redis+cluster://HOST:PORT[,HOST:PORT...] or redis+sentinel://HOST:PORT[,HOST:PORT...]/SERVICE[/DB] (rediss+cluster:// and rediss+sentinel:// for TLS)')
            [CompletionResult]::new('--password-file', '--password-file', [CompletionResultType]::ParameterName, 'File holding the Redis password (first line); wins over a password in the URL')
            [CompletionResult]::new('--sentinel-password-file', '--sentinel-password-file', [CompletionResultType]::ParameterName, 'File holding the sentinels'' own password (first line), for redis+sentinel:// and rediss+sentinel://; the master''s password is --password-file''s')
            [CompletionResult]::new('--sentinel-user', '--sentinel-user', [CompletionResultType]::ParameterName, 'ACL user the sentinels know redlock as (with --sentinel-password-file)')
            [CompletionResult]::new('--prefix', '--prefix', [CompletionResultType]::ParameterName, 'Namespace prepended to every key, so staging never blocks production')
            [CompletionResult]::new('--timeout', '--timeout', [CompletionResultType]::ParameterName, 'Connect and command timeout for talking to Redis outside the heartbeat')
            [CompletionResult]::new('--tls-ca-file', '--tls-ca-file', [CompletionResultType]::ParameterName, 'CA certificate(s) (PEM) to verify TLS servers (rediss://, rediss+cluster://, rediss+sentinel://) with, instead of the system''s')
            [CompletionResult]::new('--tls-cert-file', '--tls-cert-file', [CompletionResultType]::ParameterName, 'Client certificate (PEM) for servers that require one (with --tls-key-file)')
            [CompletionResult]::new('--tls-key-file', '--tls-key-file', [CompletionResultType]::ParameterName, 'Private key (PEM) of the client certificate')
            [CompletionResult]::new('--log-format', '--log-format', [CompletionResultType]::ParameterName, 'Format of redlock''s own messages on stderr')
            [CompletionResult]::new('--tls-insecure', '--tls-insecure', [CompletionResultType]::ParameterName, 'Do not verify the server''s certificate (TLS URLs only; prints a warning)')
            [CompletionResult]::new('-v', '-v', [CompletionResultType]::ParameterName, 'Print a timeline of what redlock does on stderr')
            [CompletionResult]::new('--verbose', '--verbose', [CompletionResultType]::ParameterName, 'Print a timeline of what redlock does on stderr')
            [CompletionResult]::new('-q', '-q', [CompletionResultType]::ParameterName, 'Print only the final error line')
            [CompletionResult]::new('--quiet', '--quiet', [CompletionResultType]::ParameterName, 'Print only the final error line')
            [CompletionResult]::new('-h', '-h', [CompletionResultType]::ParameterName, 'Print help (see more with ''--help'')')
            [CompletionResult]::new('--help', '--help', [CompletionResultType]::ParameterName, 'Print help (see more with ''--help'')')
            break
        }
        'redlock;status' {
            [CompletionResult]::new('--url', '--url', [CompletionResultType]::ParameterName, 'Redis server URL: redis://, rediss:// or redis+unix://; repeat it for a quorum of independent masters; or one redis+cluster://HOST:PORT[,HOST:PORT...] or redis+sentinel://HOST:PORT[,HOST:PORT...]/SERVICE[/DB] (rediss+cluster:// and rediss+sentinel:// for TLS)')
            [CompletionResult]::new('--password-file', '--password-file', [CompletionResultType]::ParameterName, 'File holding the Redis password (first line); wins over a password in the URL')
            [CompletionResult]::new('--sentinel-password-file', '--sentinel-password-file', [CompletionResultType]::ParameterName, 'File holding the sentinels'' own password (first line), for redis+sentinel:// and rediss+sentinel://; the master''s password is --password-file''s')
            [CompletionResult]::new('--sentinel-user', '--sentinel-user', [CompletionResultType]::ParameterName, 'ACL user the sentinels know redlock as (with --sentinel-password-file)')
            [CompletionResult]::new('--prefix', '--prefix', [CompletionResultType]::ParameterName, 'Namespace prepended to every key, so staging never blocks production')
            [CompletionResult]::new('--timeout', '--timeout', [CompletionResultType]::ParameterName, 'Connect and command timeout for talking to Redis outside the heartbeat')
            [CompletionResult]::new('--tls-ca-file', '--tls-ca-file', [CompletionResultType]::ParameterName, 'CA certificate(s) (PEM) to verify TLS servers (rediss://, rediss+cluster://, rediss+sentinel://) with, instead of the system''s')
            [CompletionResult]::new('--tls-cert-file', '--tls-cert-file', [CompletionResultType]::ParameterName, 'Client certificate (PEM) for servers that require one (with --tls-key-file)')
            [CompletionResult]::new('--tls-key-file', '--tls-key-file', [CompletionResultType]::ParameterName, 'Private key (PEM) of the client certificate')
            [CompletionResult]::new('--log-format', '--log-format', [CompletionResultType]::ParameterName, 'Format of redlock''s own messages on stderr')
            [CompletionResult]::new('--all', '--all', [CompletionResultType]::ParameterName, 'Every lock redlock created under the prefix (found with SCAN)')
            [CompletionResult]::new('--json', '--json', [CompletionResultType]::ParameterName, 'One JSON document on stdout')
            [CompletionResult]::new('--show-token', '--show-token', [CompletionResultType]::ParameterName, 'Include the holder''s token')
            [CompletionResult]::new('--tls-insecure', '--tls-insecure', [CompletionResultType]::ParameterName, 'Do not verify the server''s certificate (TLS URLs only; prints a warning)')
            [CompletionResult]::new('-v', '-v', [CompletionResultType]::ParameterName, 'Print a timeline of what redlock does on stderr')
            [CompletionResult]::new('--verbose', '--verbose', [CompletionResultType]::ParameterName, 'Print a timeline of what redlock does on stderr')
            [CompletionResult]::new('-q', '-q', [CompletionResultType]::ParameterName, 'Print only the final error line')
            [CompletionResult]::new('--quiet', '--quiet', [CompletionResultType]::ParameterName, 'Print only the final error line')
            [CompletionResult]::new('-h', '-h', [CompletionResultType]::ParameterName, 'Print help (see more with ''--help'')')
            [CompletionResult]::new('--help', '--help', [CompletionResultType]::ParameterName, 'Print help (see more with ''--help'')')
            break
        }
        'redlock;release' {
            [CompletionResult]::new('--token', '--token', [CompletionResultType]::ParameterName, 'Release only if this is the holder''s token')
            [CompletionResult]::new('--url', '--url', [CompletionResultType]::ParameterName, 'Redis server URL: redis://, rediss:// or redis+unix://; repeat it for a quorum of independent masters; or one redis+cluster://HOST:PORT[,HOST:PORT...] or redis+sentinel://HOST:PORT[,HOST:PORT...]/SERVICE[/DB] (rediss+cluster:// and rediss+sentinel:// for TLS)')
            [CompletionResult]::new('--password-file', '--password-file', [CompletionResultType]::ParameterName, 'File holding the Redis password (first line); wins over a password in the URL')
            [CompletionResult]::new('--sentinel-password-file', '--sentinel-password-file', [CompletionResultType]::ParameterName, 'File holding the sentinels'' own password (first line), for redis+sentinel:// and rediss+sentinel://; the master''s password is --password-file''s')
            [CompletionResult]::new('--sentinel-user', '--sentinel-user', [CompletionResultType]::ParameterName, 'ACL user the sentinels know redlock as (with --sentinel-password-file)')
            [CompletionResult]::new('--prefix', '--prefix', [CompletionResultType]::ParameterName, 'Namespace prepended to every key, so staging never blocks production')
            [CompletionResult]::new('--timeout', '--timeout', [CompletionResultType]::ParameterName, 'Connect and command timeout for talking to Redis outside the heartbeat')
            [CompletionResult]::new('--tls-ca-file', '--tls-ca-file', [CompletionResultType]::ParameterName, 'CA certificate(s) (PEM) to verify TLS servers (rediss://, rediss+cluster://, rediss+sentinel://) with, instead of the system''s')
            [CompletionResult]::new('--tls-cert-file', '--tls-cert-file', [CompletionResultType]::ParameterName, 'Client certificate (PEM) for servers that require one (with --tls-key-file)')
            [CompletionResult]::new('--tls-key-file', '--tls-key-file', [CompletionResultType]::ParameterName, 'Private key (PEM) of the client certificate')
            [CompletionResult]::new('--log-format', '--log-format', [CompletionResultType]::ParameterName, 'Format of redlock''s own messages on stderr')
            [CompletionResult]::new('--force', '--force', [CompletionResultType]::ParameterName, 'Delete the lock whoever holds it, and say whom it removed')
            [CompletionResult]::new('--tls-insecure', '--tls-insecure', [CompletionResultType]::ParameterName, 'Do not verify the server''s certificate (TLS URLs only; prints a warning)')
            [CompletionResult]::new('-v', '-v', [CompletionResultType]::ParameterName, 'Print a timeline of what redlock does on stderr')
            [CompletionResult]::new('--verbose', '--verbose', [CompletionResultType]::ParameterName, 'Print a timeline of what redlock does on stderr')
            [CompletionResult]::new('-q', '-q', [CompletionResultType]::ParameterName, 'Print only the final error line')
            [CompletionResult]::new('--quiet', '--quiet', [CompletionResultType]::ParameterName, 'Print only the final error line')
            [CompletionResult]::new('-h', '-h', [CompletionResultType]::ParameterName, 'Print help (see more with ''--help'')')
            [CompletionResult]::new('--help', '--help', [CompletionResultType]::ParameterName, 'Print help (see more with ''--help'')')
            break
        }
        'redlock;acquire' {
            [CompletionResult]::new('--key', '--key', [CompletionResultType]::ParameterName, 'The lock key (the prefix is prepended)')
            [CompletionResult]::new('--ttl', '--ttl', [CompletionResultType]::ParameterName, 'Lease length; keep it alive with `redlock extend`')
            [CompletionResult]::new('--wait', '--wait', [CompletionResultType]::ParameterName, 'Wait up to this long for a busy lock')
            [CompletionResult]::new('--label', '--label', [CompletionResultType]::ParameterName, 'Recorded (holder and last-run records, `status`) instead of the calling command line')
            [CompletionResult]::new('--url', '--url', [CompletionResultType]::ParameterName, 'Redis server URL: redis://, rediss:// or redis+unix://; repeat it for a quorum of independent masters; or one redis+cluster://HOST:PORT[,HOST:PORT...] or redis+sentinel://HOST:PORT[,HOST:PORT...]/SERVICE[/DB] (rediss+cluster:// and rediss+sentinel:// for TLS)')
            [CompletionResult]::new('--password-file', '--password-file', [CompletionResultType]::ParameterName, 'File holding the Redis password (first line); wins over a password in the URL')
            [CompletionResult]::new('--sentinel-password-file', '--sentinel-password-file', [CompletionResultType]::ParameterName, 'File holding the sentinels'' own password (first line), for redis+sentinel:// and rediss+sentinel://; the master''s password is --password-file''s')
            [CompletionResult]::new('--sentinel-user', '--sentinel-user', [CompletionResultType]::ParameterName, 'ACL user the sentinels know redlock as (with --sentinel-password-file)')
            [CompletionResult]::new('--prefix', '--prefix', [CompletionResultType]::ParameterName, 'Namespace prepended to every key, so staging never blocks production')
            [CompletionResult]::new('--timeout', '--timeout', [CompletionResultType]::ParameterName, 'Connect and command timeout for talking to Redis outside the heartbeat')
            [CompletionResult]::new('--tls-ca-file', '--tls-ca-file', [CompletionResultType]::ParameterName, 'CA certificate(s) (PEM) to verify TLS servers (rediss://, rediss+cluster://, rediss+sentinel://) with, instead of the system''s')
            [CompletionResult]::new('--tls-cert-file', '--tls-cert-file', [CompletionResultType]::ParameterName, 'Client certificate (PEM) for servers that require one (with --tls-key-file)')
            [CompletionResult]::new('--tls-key-file', '--tls-key-file', [CompletionResultType]::ParameterName, 'Private key (PEM) of the client certificate')
            [CompletionResult]::new('--log-format', '--log-format', [CompletionResultType]::ParameterName, 'Format of redlock''s own messages on stderr')
            [CompletionResult]::new('--json', '--json', [CompletionResultType]::ParameterName, 'Print {"token", "fence", "deadline_ms", ...} as one JSON object')
            [CompletionResult]::new('--tls-insecure', '--tls-insecure', [CompletionResultType]::ParameterName, 'Do not verify the server''s certificate (TLS URLs only; prints a warning)')
            [CompletionResult]::new('-v', '-v', [CompletionResultType]::ParameterName, 'Print a timeline of what redlock does on stderr')
            [CompletionResult]::new('--verbose', '--verbose', [CompletionResultType]::ParameterName, 'Print a timeline of what redlock does on stderr')
            [CompletionResult]::new('-q', '-q', [CompletionResultType]::ParameterName, 'Print only the final error line')
            [CompletionResult]::new('--quiet', '--quiet', [CompletionResultType]::ParameterName, 'Print only the final error line')
            [CompletionResult]::new('-h', '-h', [CompletionResultType]::ParameterName, 'Print help (see more with ''--help'')')
            [CompletionResult]::new('--help', '--help', [CompletionResultType]::ParameterName, 'Print help (see more with ''--help'')')
            break
        }
        'redlock;extend' {
            [CompletionResult]::new('--key', '--key', [CompletionResultType]::ParameterName, 'The lock key')
            [CompletionResult]::new('--token', '--token', [CompletionResultType]::ParameterName, 'The token `redlock acquire` printed')
            [CompletionResult]::new('--ttl', '--ttl', [CompletionResultType]::ParameterName, 'New lease length, from now')
            [CompletionResult]::new('--url', '--url', [CompletionResultType]::ParameterName, 'Redis server URL: redis://, rediss:// or redis+unix://; repeat it for a quorum of independent masters; or one redis+cluster://HOST:PORT[,HOST:PORT...] or redis+sentinel://HOST:PORT[,HOST:PORT...]/SERVICE[/DB] (rediss+cluster:// and rediss+sentinel:// for TLS)')
            [CompletionResult]::new('--password-file', '--password-file', [CompletionResultType]::ParameterName, 'File holding the Redis password (first line); wins over a password in the URL')
            [CompletionResult]::new('--sentinel-password-file', '--sentinel-password-file', [CompletionResultType]::ParameterName, 'File holding the sentinels'' own password (first line), for redis+sentinel:// and rediss+sentinel://; the master''s password is --password-file''s')
            [CompletionResult]::new('--sentinel-user', '--sentinel-user', [CompletionResultType]::ParameterName, 'ACL user the sentinels know redlock as (with --sentinel-password-file)')
            [CompletionResult]::new('--prefix', '--prefix', [CompletionResultType]::ParameterName, 'Namespace prepended to every key, so staging never blocks production')
            [CompletionResult]::new('--timeout', '--timeout', [CompletionResultType]::ParameterName, 'Connect and command timeout for talking to Redis outside the heartbeat')
            [CompletionResult]::new('--tls-ca-file', '--tls-ca-file', [CompletionResultType]::ParameterName, 'CA certificate(s) (PEM) to verify TLS servers (rediss://, rediss+cluster://, rediss+sentinel://) with, instead of the system''s')
            [CompletionResult]::new('--tls-cert-file', '--tls-cert-file', [CompletionResultType]::ParameterName, 'Client certificate (PEM) for servers that require one (with --tls-key-file)')
            [CompletionResult]::new('--tls-key-file', '--tls-key-file', [CompletionResultType]::ParameterName, 'Private key (PEM) of the client certificate')
            [CompletionResult]::new('--log-format', '--log-format', [CompletionResultType]::ParameterName, 'Format of redlock''s own messages on stderr')
            [CompletionResult]::new('--tls-insecure', '--tls-insecure', [CompletionResultType]::ParameterName, 'Do not verify the server''s certificate (TLS URLs only; prints a warning)')
            [CompletionResult]::new('-v', '-v', [CompletionResultType]::ParameterName, 'Print a timeline of what redlock does on stderr')
            [CompletionResult]::new('--verbose', '--verbose', [CompletionResultType]::ParameterName, 'Print a timeline of what redlock does on stderr')
            [CompletionResult]::new('-q', '-q', [CompletionResultType]::ParameterName, 'Print only the final error line')
            [CompletionResult]::new('--quiet', '--quiet', [CompletionResultType]::ParameterName, 'Print only the final error line')
            [CompletionResult]::new('-h', '-h', [CompletionResultType]::ParameterName, 'Print help (see more with ''--help'')')
            [CompletionResult]::new('--help', '--help', [CompletionResultType]::ParameterName, 'Print help (see more with ''--help'')')
            break
        }
        'redlock;doctor' {
            [CompletionResult]::new('--url', '--url', [CompletionResultType]::ParameterName, 'Redis server URL: redis://, rediss:// or redis+unix://; repeat it for a quorum of independent masters; or one redis+cluster://HOST:PORT[,HOST:PORT...] or redis+sentinel://HOST:PORT[,HOST:PORT...]/SERVICE[/DB] (rediss+cluster:// and rediss+sentinel:// for TLS)')
            [CompletionResult]::new('--password-file', '--password-file', [CompletionResultType]::ParameterName, 'File holding the Redis password (first line); wins over a password in the URL')
            [CompletionResult]::new('--sentinel-password-file', '--sentinel-password-file', [CompletionResultType]::ParameterName, 'File holding the sentinels'' own password (first line), for redis+sentinel:// and rediss+sentinel://; the master''s password is --password-file''s')
            [CompletionResult]::new('--sentinel-user', '--sentinel-user', [CompletionResultType]::ParameterName, 'ACL user the sentinels know redlock as (with --sentinel-password-file)')
            [CompletionResult]::new('--prefix', '--prefix', [CompletionResultType]::ParameterName, 'Namespace prepended to every key, so staging never blocks production')
            [CompletionResult]::new('--timeout', '--timeout', [CompletionResultType]::ParameterName, 'Connect and command timeout for talking to Redis outside the heartbeat')
            [CompletionResult]::new('--tls-ca-file', '--tls-ca-file', [CompletionResultType]::ParameterName, 'CA certificate(s) (PEM) to verify TLS servers (rediss://, rediss+cluster://, rediss+sentinel://) with, instead of the system''s')
            [CompletionResult]::new('--tls-cert-file', '--tls-cert-file', [CompletionResultType]::ParameterName, 'Client certificate (PEM) for servers that require one (with --tls-key-file)')
            [CompletionResult]::new('--tls-key-file', '--tls-key-file', [CompletionResultType]::ParameterName, 'Private key (PEM) of the client certificate')
            [CompletionResult]::new('--log-format', '--log-format', [CompletionResultType]::ParameterName, 'Format of redlock''s own messages on stderr')
            [CompletionResult]::new('--tls-insecure', '--tls-insecure', [CompletionResultType]::ParameterName, 'Do not verify the server''s certificate (TLS URLs only; prints a warning)')
            [CompletionResult]::new('-v', '-v', [CompletionResultType]::ParameterName, 'Print a timeline of what redlock does on stderr')
            [CompletionResult]::new('--verbose', '--verbose', [CompletionResultType]::ParameterName, 'Print a timeline of what redlock does on stderr')
            [CompletionResult]::new('-q', '-q', [CompletionResultType]::ParameterName, 'Print only the final error line')
            [CompletionResult]::new('--quiet', '--quiet', [CompletionResultType]::ParameterName, 'Print only the final error line')
            [CompletionResult]::new('-h', '-h', [CompletionResultType]::ParameterName, 'Print help (see more with ''--help'')')
            [CompletionResult]::new('--help', '--help', [CompletionResultType]::ParameterName, 'Print help (see more with ''--help'')')
            break
        }
    })

    $completions.Where{ $_.CompletionText -like "$wordToComplete*" } |
        Sort-Object -Property ListItemText
}
