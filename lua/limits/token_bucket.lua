-- Token bucket: `limit` tokens of capacity, refilled continuously at `rate` tokens per `interval` ms; a new bucket
-- starts full. A request takes `permits` tokens if the bucket holds them; tokens never go negative.
--
-- State: string 'tb:<units>:<at>', units = tokens × interval (bucket.lua) as of unix ms `at`: one GET, one SET … PX.
-- A missing key is a full bucket, so the key expires when the bucket would be full again. The tag 'tb:' marks the
-- layout; any other value is refused (foreign_value.lua).
--
-- A grant's receipt is '<permits>:<unix ms of the grant>'. A refund gives back only what the grant still keeps out
-- of the bucket, permits × interval − (now − granted) × rate units when positive: never more than if the grant had
-- not been made.

--@decision

-- Units in the bucket at `now`, refilled since `at`. A stored `at` after `now` (a caller's clock behind Redis's)
-- refills nothing and keeps the later time. ceil(a / b) is written out (bucket.lua).
local full = limit * interval
local value = redis.call('GET', key) or ''
local units, at = string.match(value, '^tb:(%d+):(%d+)$')
if value ~= '' and not units then
    --@inline limits/string_tag.lua
    --@inline limits/foreign_value.lua
end
if units then
    units, at = units + 0, at + 0
    units = units < full and units or full
    if now > at then
        -- Only multiply when the bucket does not fill up anyway: the product stays below full + rate.
        local fill = full - units + rate - 1
        if now - at >= (fill - fill % rate) / rate then
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
    local granted = string.find(mark, '^%d+$') and mark + 0
    if not granted or granted > now then
        error({ err = 'ERR edgelimit: invalid ' .. RECEIPT_MARK .. ': ' .. mark })
    end
    local taken, elapsed = permits * interval, now - granted
    -- elapsed × rate < taken + rate here: no product past 2^53.
    local span = taken + rate - 1
    local credit = elapsed < (span - span % rate) / rate and taken - elapsed * rate or 0
    held = credit > 0 and units < full
    if held then
        units = units + credit < full and units + credit or full
        if units >= full then
            redis.call('DEL', key)
        else
            local fill = full - units + rate - 1
            redis.call('SET', key, string.format('tb:%d:%d', units, at), 'PX',
                at - now + (fill - fill % rate) / rate + grace)
        end
    end
    permits = 1
end
-- The verdict over units (bucket.lua): the units left after the grant, and the ms until each standing is reached.
local left = units - permits * interval
local fill = full - units + rate - 1
allowed, remaining, reset = left >= 0, units - units % interval, now + (fill - fill % rate) / rate
remaining = remaining > 0 and remaining / interval or 0
fill = full - left + rate - 1
reset_after = now + (fill - fill % rate) / rate
if allowed then
    retry_after = 0
else
    fill = rate - 1 - left
    retry_after = (fill - fill % rate) / rate
end

--@grant

-- The key expires when the bucket is full again, `reset_after` counted from `at` (later than now on a caller's
-- clock behind Redis's). A grant takes at least one permit, so the bucket is never full after it.
redis.call('SET', key, string.format('tb:%d:%d', left, at), 'PX', at - now + reset_after - now + grace)
granted_mark = now
