-- Token bucket: `limit` tokens of capacity, refilled continuously at `rate` tokens per `interval` ms; a new bucket
-- starts full. A request takes `permits` tokens if the bucket holds them; tokens never go negative.
--
-- State: string '<units>:<at>', units = tokens × interval as of unix ms `at`: one GET to read, one SET … PX to
-- write (Redis commands dominate a script's cost). A missing key is a full bucket, so the key expires exactly when
-- the bucket would be full again.

-- Units in the bucket at `now`, refilled since `at`. A stored `at` after `now` (a caller's clock behind Redis's)
-- refills nothing and keeps the later time.
local function bucket_units(quota, key, now)
    local full = quota.limit * quota.interval
    local units, at = string.match(redis.call('GET', key) or '', '^(%d+):(%d+)$')
    units, at = tonumber(units), tonumber(at)
    if not units or not at then
        return full, now
    end
    units = math.min(units, full)
    if now > at then
        -- Only multiply when the bucket does not fill up anyway: the product stays below full + rate.
        if now - at >= ceil_div(full - units, quota.rate) then
            units = full
        else
            units = units + (now - at) * quota.rate
        end
        at = now
    end
    return units, at
end

local function write_bucket(quota, key, units, at, now, grace)
    local full = quota.limit * quota.interval
    if units >= full then
        redis.call('DEL', key)
        return
    end
    redis.call('SET', key, string.format('%d:%d', units, at), 'PX', at - now + ceil_div(full - units, quota.rate) + grace)
end

ALGORITHMS.token_bucket = {
    decide = function(quota, key, now, permits)
        local units, at = bucket_units(quota, key, now)
        local verdict = bucket_verdict(quota, now, units, permits)
        verdict.commit = function(grace)
            write_bucket(quota, key, verdict.left, at, now, grace)
        end
        return verdict
    end,
    refund = function(quota, key, now, permits, grace)
        local units, at = bucket_units(quota, key, now)
        write_bucket(quota, key, units + permits * quota.interval, at, now, grace)
    end,
}
