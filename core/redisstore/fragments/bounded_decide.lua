-- A bounded rate has room for cost more while its window's count stays within N.
if sum + cost > N then allowed = false end
