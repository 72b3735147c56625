
use builtin;
use str;

set edit:completion:arg-completer[redlock] = {|@words|
    fn spaces {|n|
        builtin:repeat $n ' ' | str:join ''
    }
    fn cand {|text desc|
        edit:complex-candidate $text &display=$text' '(spaces (- 14 (wcswidth $text)))$desc
    }
    var command = 'redlock'
    for word $words[1..-1] {
        if (str:has-prefix $word '-') {
            break
        }
        set command = $command';'$word
    }
    var completions = [
        &'redlock'= {
            cand --url 'Redis server URL: redis://, rediss:// or redis+unix://; repeat it for a quorum of independent masters; or one redis+cluster://HOST:PORT[,HOST:PORT...] or redis+sentinel://HOST:PORT[,HOST:PORT...]/SERVICE'
            cand --password-file 'File holding the Redis password (first line); wins over a password in the URL'
            cand --prefix 'Namespace prepended to every key, so staging never blocks production'
            cand --timeout 'Connect and command timeout for talking to Redis outside the heartbeat'
            cand --tls-ca-file 'CA certificate(s) (PEM) to verify rediss:// servers with, instead of the system''s'
            cand --tls-cert-file 'Client certificate (PEM) for servers that require one (with --tls-key-file)'
            cand --tls-key-file 'Private key (PEM) of the client certificate'
            cand --log-format 'Format of redlock''s own messages on stderr'
            cand --tls-insecure 'Do not verify the server''s certificate (rediss:// only; prints a warning)'
            cand -v 'Print a timeline of what redlock does on stderr'
            cand --verbose 'Print a timeline of what redlock does on stderr'
            cand -q 'Print only the final error line'
            cand --quiet 'Print only the final error line'
            cand -h 'Print help (see more with ''--help'')'
            cand --help 'Print help (see more with ''--help'')'
            cand -V 'Print version'
            cand --version 'Print version'
            cand run 'Run a command while holding the lock'
            cand status 'Show who holds a lock, since when, and how its last run ended (0 held, 1 free)'
            cand release 'Release a lock by its token, or force it (0 released, 1 nothing released)'
            cand acquire 'Take the lock and print its token, for shell scripts'
            cand extend 'Renew a lock held by TOKEN (0 renewed, 1 not the holder)'
            cand doctor 'Check the server for lock hazards and print each finding with its fix'
        }
        &'redlock;run'= {
            cand --key 'The lock key (the prefix is prepended)'
            cand --ttl 'Lease length; renewed every TTL/3 while the command runs'
            cand --wait 'Wait up to this long for a busy lock instead of giving up at once'
            cand --conflict-exit-code 'Exit status when the lock is busy (instead of 75); 0 counts a skipped run as success'
            cand --kill-after 'Grace between SIGTERM and SIGKILL when redlock must stop the command [default: TTL/5, at most 10s]'
            cand --hold-at-least 'Keep the lock at least this long after acquiring it, even when the command ends sooner'
            cand --max-runtime 'Stop the command''s whole tree this long after the lock was taken: SIGTERM, SIGKILL --kill-after later; redlock then exits 124 (as timeout(1) does) and the run is recorded as timed out. Renewals never carry the lease past it plus the kill grace'
            cand --contain 'How redlock finds every process the command starts: auto (a cgroup of its own where redlock may create one, otherwise its descendants), or descendants'
            cand --label 'Recorded (holder and last-run records, `status`) instead of the command'
            cand -c 'Run this through `sh -c` instead of a command after `--`'
            cand --url 'Redis server URL: redis://, rediss:// or redis+unix://; repeat it for a quorum of independent masters; or one redis+cluster://HOST:PORT[,HOST:PORT...] or redis+sentinel://HOST:PORT[,HOST:PORT...]/SERVICE'
            cand --password-file 'File holding the Redis password (first line); wins over a password in the URL'
            cand --prefix 'Namespace prepended to every key, so staging never blocks production'
            cand --timeout 'Connect and command timeout for talking to Redis outside the heartbeat'
            cand --tls-ca-file 'CA certificate(s) (PEM) to verify rediss:// servers with, instead of the system''s'
            cand --tls-cert-file 'Client certificate (PEM) for servers that require one (with --tls-key-file)'
            cand --tls-key-file 'Private key (PEM) of the client certificate'
            cand --log-format 'Format of redlock''s own messages on stderr'
            cand --tls-insecure 'Do not verify the server''s certificate (rediss:// only; prints a warning)'
            cand -v 'Print a timeline of what redlock does on stderr'
            cand --verbose 'Print a timeline of what redlock does on stderr'
            cand -q 'Print only the final error line'
            cand --quiet 'Print only the final error line'
            cand -h 'Print help (see more with ''--help'')'
            cand --help 'Print help (see more with ''--help'')'
        }
        &'redlock;status'= {
            cand --url 'Redis server URL: redis://, rediss:// or redis+unix://; repeat it for a quorum of independent masters; or one redis+cluster://HOST:PORT[,HOST:PORT...] or redis+sentinel://HOST:PORT[,HOST:PORT...]/SERVICE'
            cand --password-file 'File holding the Redis password (first line); wins over a password in the URL'
            cand --prefix 'Namespace prepended to every key, so staging never blocks production'
            cand --timeout 'Connect and command timeout for talking to Redis outside the heartbeat'
            cand --tls-ca-file 'CA certificate(s) (PEM) to verify rediss:// servers with, instead of the system''s'
            cand --tls-cert-file 'Client certificate (PEM) for servers that require one (with --tls-key-file)'
            cand --tls-key-file 'Private key (PEM) of the client certificate'
            cand --log-format 'Format of redlock''s own messages on stderr'
            cand --all 'Every lock redlock created under the prefix (found with SCAN)'
            cand --json 'One JSON document on stdout'
            cand --show-token 'Include the holder''s token'
            cand --tls-insecure 'Do not verify the server''s certificate (rediss:// only; prints a warning)'
            cand -v 'Print a timeline of what redlock does on stderr'
            cand --verbose 'Print a timeline of what redlock does on stderr'
            cand -q 'Print only the final error line'
            cand --quiet 'Print only the final error line'
            cand -h 'Print help (see more with ''--help'')'
            cand --help 'Print help (see more with ''--help'')'
        }
        &'redlock;release'= {
            cand --token 'Release only if this is the holder''s token'
            cand --url 'Redis server URL: redis://, rediss:// or redis+unix://; repeat it for a quorum of independent masters; or one redis+cluster://HOST:PORT[,HOST:PORT...] or redis+sentinel://HOST:PORT[,HOST:PORT...]/SERVICE'
            cand --password-file 'File holding the Redis password (first line); wins over a password in the URL'
            cand --prefix 'Namespace prepended to every key, so staging never blocks production'
            cand --timeout 'Connect and command timeout for talking to Redis outside the heartbeat'
            cand --tls-ca-file 'CA certificate(s) (PEM) to verify rediss:// servers with, instead of the system''s'
            cand --tls-cert-file 'Client certificate (PEM) for servers that require one (with --tls-key-file)'
            cand --tls-key-file 'Private key (PEM) of the client certificate'
            cand --log-format 'Format of redlock''s own messages on stderr'
            cand --force 'Delete the lock whoever holds it, and say whom it removed'
            cand --tls-insecure 'Do not verify the server''s certificate (rediss:// only; prints a warning)'
            cand -v 'Print a timeline of what redlock does on stderr'
            cand --verbose 'Print a timeline of what redlock does on stderr'
            cand -q 'Print only the final error line'
            cand --quiet 'Print only the final error line'
            cand -h 'Print help (see more with ''--help'')'
            cand --help 'Print help (see more with ''--help'')'
        }
        &'redlock;acquire'= {
            cand --key 'The lock key (the prefix is prepended)'
            cand --ttl 'Lease length; keep it alive with `redlock extend`'
            cand --wait 'Wait up to this long for a busy lock'
            cand --label 'Recorded (holder and last-run records, `status`) instead of the calling command line'
            cand --url 'Redis server URL: redis://, rediss:// or redis+unix://; repeat it for a quorum of independent masters; or one redis+cluster://HOST:PORT[,HOST:PORT...] or redis+sentinel://HOST:PORT[,HOST:PORT...]/SERVICE'
            cand --password-file 'File holding the Redis password (first line); wins over a password in the URL'
            cand --prefix 'Namespace prepended to every key, so staging never blocks production'
            cand --timeout 'Connect and command timeout for talking to Redis outside the heartbeat'
            cand --tls-ca-file 'CA certificate(s) (PEM) to verify rediss:// servers with, instead of the system''s'
            cand --tls-cert-file 'Client certificate (PEM) for servers that require one (with --tls-key-file)'
            cand --tls-key-file 'Private key (PEM) of the client certificate'
            cand --log-format 'Format of redlock''s own messages on stderr'
            cand --json 'Print {"token", "fence", "deadline_ms", ...} as one JSON object'
            cand --tls-insecure 'Do not verify the server''s certificate (rediss:// only; prints a warning)'
            cand -v 'Print a timeline of what redlock does on stderr'
            cand --verbose 'Print a timeline of what redlock does on stderr'
            cand -q 'Print only the final error line'
            cand --quiet 'Print only the final error line'
            cand -h 'Print help (see more with ''--help'')'
            cand --help 'Print help (see more with ''--help'')'
        }
        &'redlock;extend'= {
            cand --key 'The lock key'
            cand --token 'The token `redlock acquire` printed'
            cand --ttl 'New lease length, from now'
            cand --url 'Redis server URL: redis://, rediss:// or redis+unix://; repeat it for a quorum of independent masters; or one redis+cluster://HOST:PORT[,HOST:PORT...] or redis+sentinel://HOST:PORT[,HOST:PORT...]/SERVICE'
            cand --password-file 'File holding the Redis password (first line); wins over a password in the URL'
            cand --prefix 'Namespace prepended to every key, so staging never blocks production'
            cand --timeout 'Connect and command timeout for talking to Redis outside the heartbeat'
            cand --tls-ca-file 'CA certificate(s) (PEM) to verify rediss:// servers with, instead of the system''s'
            cand --tls-cert-file 'Client certificate (PEM) for servers that require one (with --tls-key-file)'
            cand --tls-key-file 'Private key (PEM) of the client certificate'
            cand --log-format 'Format of redlock''s own messages on stderr'
            cand --tls-insecure 'Do not verify the server''s certificate (rediss:// only; prints a warning)'
            cand -v 'Print a timeline of what redlock does on stderr'
            cand --verbose 'Print a timeline of what redlock does on stderr'
            cand -q 'Print only the final error line'
            cand --quiet 'Print only the final error line'
            cand -h 'Print help (see more with ''--help'')'
            cand --help 'Print help (see more with ''--help'')'
        }
        &'redlock;doctor'= {
            cand --url 'Redis server URL: redis://, rediss:// or redis+unix://; repeat it for a quorum of independent masters; or one redis+cluster://HOST:PORT[,HOST:PORT...] or redis+sentinel://HOST:PORT[,HOST:PORT...]/SERVICE'
            cand --password-file 'File holding the Redis password (first line); wins over a password in the URL'
            cand --prefix 'Namespace prepended to every key, so staging never blocks production'
            cand --timeout 'Connect and command timeout for talking to Redis outside the heartbeat'
            cand --tls-ca-file 'CA certificate(s) (PEM) to verify rediss:// servers with, instead of the system''s'
            cand --tls-cert-file 'Client certificate (PEM) for servers that require one (with --tls-key-file)'
            cand --tls-key-file 'Private key (PEM) of the client certificate'
            cand --log-format 'Format of redlock''s own messages on stderr'
            cand --tls-insecure 'Do not verify the server''s certificate (rediss:// only; prints a warning)'
            cand -v 'Print a timeline of what redlock does on stderr'
            cand --verbose 'Print a timeline of what redlock does on stderr'
            cand -q 'Print only the final error line'
            cand --quiet 'Print only the final error line'
            cand -h 'Print help (see more with ''--help'')'
            cand --help 'Print help (see more with ''--help'')'
        }
    ]
    $completions[$command]
}
