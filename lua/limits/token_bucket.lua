-- Token bucket: `limit` tokens of capacity, refilled continuously at `rate` tokens per `interval` ms; a new bucket
-- starts full. A request takes `permits` tokens if the bucket holds them; tokens never go negative.
--
-- State: string '<units>:<at>', units = tokens × interval as of unix ms `at`: one GET to read, one SET … PX to
-- write (Redis commands dominate a script's cost). A missing key is a full bucket, so the key expires exactly when
-- the bucket would be full again.

-- Units in the bucket at `now`, refilled since `at`. A stored `at` after `now` (a caller's clock behind Redis's)
-- refills nothing and keeps the later time.
local function bucket_units(limit, now)
    local full = limit.limit * limit.interval
    local units, at = string.match(redis.call('GET', limit.key) or '', '^(%d+):(%d+)$')
    if not units then
        return full, now
    end
    units, at = math.min(units + 0, full), at + 0
    if now > at then
        -- Only multiply when the bucket does not fill up anyway: the product stays below full + rate.
        if now - at >= ceil_div(full - units, limit.rate) then
            units = full
        else
            units = units + (now - at) * limit.rate
        end
        at = now
    end
    return units, at
end

local function write_bucket(limit, units, at, now, grace)
    local full = limit.limit * limit.interval
    if units >= full then
        redis.call('DEL', limit.key)
        return
    end
    redis.call('SET', limit.key, string.format('%d:%d', units, at), 'PX',
        at - now + ceil_div(full - units, limit.rate) + grace)
end

ALGORITHMS.token_bucket = {
    decide = function(limit, now)
        local units, at = bucket_units(limit, now)
        bucket_verdict(limit, now, units)
        limit.at = at
    end,
    commit = function(limit, now, grace)
        write_bucket(limit, limit.left, limit.at, now, grace)
    end,
    refund = function(limit, now, grace)
        local units, at = bucket_units(limit, now)
        write_bucket(limit, units + limit.permits * limit.interval, at, now, grace)
    end,
}
