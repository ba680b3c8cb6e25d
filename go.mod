module servery

go 1.26
