"""Process helpers of the commands and the webserver: the webserver's coordinator
processes (its warm standby, detached adopters), the workers' fork server, quick exit,
and workers that die with their coordinator."""
