package edgelimit;

import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.io.PrintStream;
import java.nio.charset.StandardCharsets;
import java.time.Duration;

import org.redisson.Redisson;
import org.redisson.api.RRateLimiter;
import org.redisson.api.RateLimiterConfig;
import org.redisson.api.RateType;
import org.redisson.api.RedissonClient;
import org.redisson.config.Config;

/**
 * Drives Redisson's own RRateLimiter for the interop test (tests/tests/redisson_java.rs), one command a line on
 * stdin, one reply a line on stdout: {@code ok [value]} or {@code err <what went wrong>}. Usage:
 * {@code java -cp <classpath> edgelimit.RedissonDriver redis://127.0.0.1:6379}. It prints {@code ready <client id>}
 * once connected.
 *
 * <pre>
 * id                                         Redisson's client id: the per-client budget's key suffix
 * now                                        this JVM's clock (System.currentTimeMillis), which Redisson scores with
 * trySetRate NAME MODE RATE INTERVAL_MS KEEP_ALIVE_MS          ok true|false   (MODE: overall | per-client)
 * setRate NAME MODE RATE INTERVAL_MS KEEP_ALIVE_MS             ok
 * updateRate NAME MODE RATE INTERVAL_MS KEEP_ALIVE_MS KEEP     ok true|false   (Redisson 4; KEEP: keep state 1|0)
 * tryAcquire NAME PERMITS                    ok true|false
 * burst NAME PERMITS COUNT                  ok GRANTED ELAPSED_MS (COUNT tryAcquire back to back)
 * tryAcquireFor NAME PERMITS TIMEOUT_MS      ok true|false   (waits, as Redisson's tryAcquire(permits, timeout))
 * available NAME                             ok N            (availablePermits)
 * release NAME PERMITS                       ok
 * config NAME                                ok RATE INTERVAL_MS MODE
 * expire NAME MS                             ok true|false   (RExpirable.expire on the limiter's keys)
 * delete NAME                                ok true|false
 * </pre>
 */
public final class RedissonDriver {
    public static void main(String[] args) throws Exception {
        if (args.length != 1) {
            System.err.println("usage: RedissonDriver redis://HOST:PORT");
            System.exit(2);
        }
        Config config = new Config();
        // Small pools and few threads: the test machine is shared.
        config.setThreads(1);
        config.setNettyThreads(2);
        config.useSingleServer()
                .setAddress(args[0])
                .setConnectionMinimumIdleSize(1)
                .setConnectionPoolSize(2)
                .setSubscriptionConnectionMinimumIdleSize(1)
                .setSubscriptionConnectionPoolSize(1);
        RedissonClient redisson = Redisson.create(config);
        PrintStream out = new PrintStream(System.out, true, StandardCharsets.UTF_8);
        out.println("ready " + redisson.getId());
        BufferedReader in = new BufferedReader(new InputStreamReader(System.in, StandardCharsets.UTF_8));
        String line;
        while ((line = in.readLine()) != null) {
            String reply;
            try {
                reply = run(redisson, line.trim().split("\\s+"));
            } catch (Throwable e) {
                Throwable cause = e;
                while (cause.getCause() != null) {
                    cause = cause.getCause();
                }
                reply = "err " + cause.getClass().getSimpleName() + ": " + String.valueOf(cause.getMessage())
                        .replace('\n', ' ');
            }
            out.println(reply);
        }
        redisson.shutdown();
    }

    private static RateType mode(String text) {
        switch (text) {
            case "overall":
                return RateType.OVERALL;
            case "per-client":
                return RateType.PER_CLIENT;
            default:
                throw new IllegalArgumentException("mode must be overall or per-client, got " + text);
        }
    }

    private static Duration ms(String text) {
        return Duration.ofMillis(Long.parseLong(text));
    }

    private static String run(RedissonClient redisson, String[] a) throws Exception {
        switch (a[0]) {
            case "id":
                return "ok " + redisson.getId();
            case "now":
                return "ok " + System.currentTimeMillis();
            default:
                break;
        }
        RRateLimiter limiter = redisson.getRateLimiter(a[1]);
        switch (a[0]) {
            case "trySetRate":
                return "ok " + limiter.trySetRate(mode(a[2]), Long.parseLong(a[3]), ms(a[4]), ms(a[5]));
            case "setRate":
                limiter.setRate(mode(a[2]), Long.parseLong(a[3]), ms(a[4]), ms(a[5]));
                return "ok";
            case "updateRate":
                return "ok " + updateRate(limiter, mode(a[2]), Long.parseLong(a[3]), ms(a[4]), ms(a[5]),
                        a[6].equals("1"));
            case "tryAcquire":
                return "ok " + limiter.tryAcquire(Long.parseLong(a[2]));
            case "burst": {
                // COUNT tryAcquire(PERMITS) back to back inside the JVM: "ok <granted> <elapsed ms>".
                long granted = 0;
                long started = System.nanoTime();
                for (int i = 0; i < Integer.parseInt(a[3]); i++) {
                    if (limiter.tryAcquire(Long.parseLong(a[2]))) {
                        granted++;
                    }
                }
                return "ok " + granted + " " + (System.nanoTime() - started) / 1_000_000;
            }
            case "tryAcquireFor":
                return "ok " + limiter.tryAcquire(Long.parseLong(a[2]), ms(a[3]));
            case "available":
                return "ok " + limiter.availablePermits();
            case "release":
                limiter.release(Long.parseLong(a[2]));
                return "ok";
            case "config": {
                RateLimiterConfig c = limiter.getConfig();
                String mode = c.getRateType() == RateType.PER_CLIENT ? "per-client" : "overall";
                return "ok " + c.getRate() + " " + c.getRateInterval() + " " + mode;
            }
            case "expire":
                return "ok " + limiter.expire(ms(a[2]));
            case "delete":
                return "ok " + limiter.delete();
            default:
                return "err unknown command " + a[0];
        }
    }

    /**
     * Redisson 4's {@code updateRate(RateLimiterArgs.of(mode, rate, interval).keepAliveTime(k).keepState(keep))},
     * by reflection: the driver compiles against Redisson 3 too, which has no updateRate.
     */
    private static boolean updateRate(RRateLimiter limiter, RateType mode, long rate, Duration interval,
            Duration keepAlive, boolean keepState) throws Exception {
        Class<?> argsClass;
        try {
            argsClass = Class.forName("org.redisson.api.ratelimiter.RateLimiterArgs");
        } catch (ClassNotFoundException e) {
            throw new UnsupportedOperationException("updateRate needs Redisson 4");
        }
        Object args = argsClass.getMethod("of", RateType.class, long.class, Duration.class)
                .invoke(null, mode, rate, interval);
        args = argsClass.getMethod("keepAliveTime", Duration.class).invoke(args, keepAlive);
        args = argsClass.getMethod("keepState", boolean.class).invoke(args, keepState);
        return (Boolean) RRateLimiter.class.getMethod("updateRate", argsClass).invoke(limiter, args);
    }
}
