-- Token bucket: `limit` tokens of capacity, refilled continuously at `rate` tokens per `interval` ms; a new bucket
-- starts full. A request takes `permits` tokens if the bucket holds them; tokens never go negative.
--
-- State: string '<units>:<at>', units = tokens × interval as of unix ms `at`: one GET to read, one SET … PX to
-- write (Redis commands dominate a script's cost). A missing key is a full bucket, so the key expires exactly when
-- the bucket would be full again.

local function write_bucket(key, limit, interval, rate, units, at, now, grace)
    local full = limit * interval
    if units >= full then
        redis.call('DEL', key)
        return
    end
    redis.call('SET', key, string.format('%d:%d', units, at), 'PX', at - now + ceil_div(full - units, rate) + grace)
end

--@decision

-- Units in the bucket at `now`, refilled since `at`. A stored `at` after `now` (a caller's clock behind Redis's)
-- refills nothing and keeps the later time.
local full = limit * interval
local units, at = string.match(redis.call('GET', key) or '', '^(%d+):(%d+)$')
if units then
    units, at = math.min(units + 0, full), at + 0
    if now > at then
        -- Only multiply when the bucket does not fill up anyway: the product stays below full + rate.
        if now - at >= ceil_div(full - units, rate) then
            units = full
        else
            units = units + (now - at) * rate
        end
        at = now
    end
else
    units, at = full, now
end
if operation == 'refund' then
    units = math.min(units + permits * interval, full)
    write_bucket(key, limit, interval, rate, units, at, now, grace)
    permits = 1
end
local left
allowed, retry_after, remaining, reset, reset_after, left = bucket_verdict(permits, limit, interval, rate, now, units)

--@grant

write_bucket(key, limit, interval, rate, left, at, now, grace)
