-- Token bucket: `limit` tokens of capacity, refilled continuously at `rate` tokens per `interval` ms; a new bucket
-- starts full. A request takes `permits` tokens if the bucket holds them; tokens never go negative.
--
-- State: string 'tb:<units>:<at>', units = tokens × interval as of unix ms `at`: one GET to read, one SET … PX to
-- write (Redis commands dominate a script's cost). A missing key is a full bucket, so the key expires exactly when
-- the bucket would be full again. The tag 'tb:' says whose value it is: another algorithm's (a stored quota that
-- changed its algorithm) matches no pattern here and is read as no state, a full bucket.
--
-- A grant's receipt is '<permits>:<unix ms of the grant>'. A refund of it at `now` gives back what the grant took
-- less what has refilled since, permits × interval − (now − granted) × rate units, when that is positive: those
-- are the units the grant still keeps out of the bucket, so a refund never lets through more than if the grant had
-- never been made (the full permits × interval, refunded after a refill, would).

local function write_bucket(key, limit, interval, rate, units, at, now, grace)
    local full = limit * interval
    if units >= full then
        redis.call('DEL', key)
        return
    end
    redis.call('SET', key, string.format('tb:%d:%d', units, at), 'PX', at - now + ceil_div(full - units, rate) + grace)
end

--@decision

-- Units in the bucket at `now`, refilled since `at`. A stored `at` after `now` (a caller's clock behind Redis's)
-- refills nothing and keeps the later time.
local full = limit * interval
local units, at = string.match(redis.call('GET', key) or '', '^tb:(%d+):(%d+)$')
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
    local granted = string.find(mark, '^%d+$') and whole_number(mark, 0, now) or reject(RECEIPT_MARK, mark)
    local taken, elapsed = permits * interval, now - granted
    -- elapsed × rate < taken + rate here: no product past 2^53.
    local credit = elapsed < ceil_div(taken, rate) and taken - elapsed * rate or 0
    held = credit > 0 and units < full
    if held then
        units = math.min(units + credit, full)
        write_bucket(key, limit, interval, rate, units, at, now, grace)
    end
    permits = 1
end
local left
allowed, retry_after, remaining, reset, reset_after, left = bucket_verdict(permits, limit, interval, rate, now, units)

--@grant

write_bucket(key, limit, interval, rate, left, at, now, grace)
token = string.format('%d:%d', permits, now)
